"""Models built two at a time (``build_marts``): each sees what it reads, intermediates go once read, a model
calling a function is built a batch of its pieces at a time, and a failing model (out of memory, a piece too large)
is named and stops the build."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pytest

from transforms import op_tree
from transforms.models import discover_models
from transforms.runner import (
    FunctionMemory,
    PieceTooLarge,
    build_marts,
    calls_functions,
    models_to_start,
    pack_pieces,
)


def _write_models(root: Path, models: dict[str, str]) -> Path:
    for relative, sql in models.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(sql)
    return root


def test_models_read_what_others_built_and_intermediates_go_once_read(tmp_path: Path) -> None:
    root = _write_models(tmp_path, {
        "intermediate/int_numbers.sql": "select range as n from range(1000)",
        "marts/evens.sql": "-- grain: run_id\nselect getvariable('run_id') as run_id, count(*) as n "
                           "from int_numbers where n % 2 = 0",
        "marts/total.sql": "-- grain: run_id\nselect getvariable('run_id') as run_id, sum(n)::bigint as n "
                           "from int_numbers",
        "marts/summary.sql": "-- grain: run_id\nselect run_id, evens.n as evens, total.n as total "
                             "from evens join total using (run_id)",
    })
    con = duckdb.connect(config={"threads": 2})
    con.execute("set variable run_id = 'r1'")
    results = build_marts(con, sql_root=root)
    assert {r.name: r.preview for r in results} == {
        "evens": [("r1", 500)], "total": [("r1", 499500)], "summary": [("r1", 500, 499500)],
    }
    assert [r.name for r in results][-1] == "summary"  # in dependency order, as they were read
    assert _tables(con) == {"evens", "total", "summary"}  # the intermediate went once its readers had run
    assert con.execute("select current_setting('threads')").fetchone() == (2,)


def test_models_calling_functions_start_one_at_a_time() -> None:
    calling = {"int_op_nodes", "int_tb_step_segments", "critical_path"}
    ready = ["int_op_nodes", "int_tb_step_segments", "int_launches", "critical_path", "kernel_stats"]
    assert models_to_start(ready, 2, set(), calling) == ["int_op_nodes", "int_launches"]
    # one runs: the others that call functions wait, and what is free goes to the next in line
    assert models_to_start(ready[1:], 1, {"int_op_nodes"}, calling) == ["int_launches"]
    assert models_to_start(["critical_path"], 1, {"int_tb_step_segments"}, calling) == []
    assert models_to_start(["critical_path", "kernel_stats"], 2, {"int_launches"}, calling) == [
        "critical_path", "kernel_stats"]


def test_the_shipped_models_calling_functions_are_found() -> None:
    models = discover_models()
    assert {name for name, model in models.items() if calls_functions(model)} == {
        "int_op_nodes", "int_tb_step_segments", "critical_path"}


def test_a_failing_model_is_named_and_stops_the_one_beside_it(tmp_path: Path) -> None:
    root = _write_models(tmp_path, {
        # broken fails once int_pause is built, while slow (far longer than the rest) is running beside them
        "intermediate/int_pause.sql": "select count(*) as n from range(30000000) where hash(range) % 7 = 0",
        "marts/broken.sql": "-- grain: run_id\nselect 'r' as run_id, cast('not ' || n as integer) as n from int_pause",
        "marts/slow.sql": "-- grain: run_id\nselect 'r' as run_id, count(*) as n "
                          "from range(20000000000) where hash(range) % 7 = 0",
    })
    con = duckdb.connect(config={"threads": 2})
    with pytest.raises(RuntimeError, match=r"broken\.sql: Conversion Error"):
        build_marts(con, sql_root=root)
    assert "slow" not in _tables(con)  # interrupted: it would be there had it run to its end
    assert con.execute("select current_setting('threads')").fetchone() == (2,)  # the connection is as it was


def test_a_model_out_of_memory_is_named_with_the_setting_and_not_built_again(tmp_path: Path) -> None:
    # A list of a million BIGINTs is held whole (an aggregate state is not spilled): over a 16 MiB buffer.
    root = _write_models(tmp_path, {
        "marts/listed.sql": "-- grain: run_id\nselect 'r' as run_id, len(list(range)) as n from range(1000000)",
    })
    con = duckdb.connect(config={"threads": 2, "memory_limit": "16MiB"})
    memory = FunctionMemory(64 << 20, "--memory-limit 1GB")
    with pytest.raises(RuntimeError, match=r"listed\.sql: out of memory within the analysis tables' buffer of "
                                           r"16\.0 MiB \(--memory-limit 1GB\): Out of Memory Error"):
        build_marts(con, sql_root=root, memory=memory)
    assert _memory_limit(con) == "16.0 MiB"


def test_consecutive_pieces_are_packed_into_batches_within_the_rows_a_call_may_hold() -> None:
    pieces, rows = np.array([1, 2, 3, 5, 8]), np.array([40, 50, 10, 100, 1])
    assert pack_pieces(pieces, rows, 100) == [(1, 3), (5, 5), (8, 8)]
    assert pack_pieces(pieces, rows, 1000) == [(1, 8)]
    assert pack_pieces(np.array([], dtype=int), np.array([], dtype=int), 10) == []
    with pytest.raises(PieceTooLarge) as raised:
        pack_pieces(pieces, rows, 99)
    assert (raised.value.piece, raised.value.rows) == (5, 100)


_PIECES = {
    # 100 pieces of 1,000 ranges each, every range a thread's own tree: op_tree links each piece's list
    "intermediate/int_parts.sql": "select range // 1000 + 1 as piece, range as n from range(100000)",
    "marts/piece_trees.sql": (
        "-- grain: piece\n-- pieces: int_parts\n-- piece_name: 'part ' || any_value(piece)\n"
        "select piece, len(op_tree(list({'event_idx': n, 'ts_ns': n, 'dur_ns': 1, 'name_key': 1::ubigint, "
        "'is_operator': true, 'is_plain_operator': true, 'torch_tree': true, 'device_ns': 0, 'kernel_count': 0}))) "
        "as ranges\nfrom int_parts\n"
        "where piece between coalesce(getvariable('first_piece'), 0)\n"
        "    and coalesce(getvariable('last_piece'), 9223372036854775807)\n"
        "group by piece"
    ),
}


def test_a_model_in_pieces_is_built_a_batch_at_a_time_and_a_piece_too_large_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []  # the ranges each call of op_tree held
    linked_rows = op_tree._linked_rows

    def counted(ranges):  # type: ignore[no-untyped-def]
        calls.append(sum(len(lists) for lists in ranges.to_pylist()))
        return linked_rows(ranges)

    monkeypatch.setattr(op_tree, "_linked_rows", counted)
    root = _write_models(tmp_path, _PIECES)
    con = duckdb.connect(config={"threads": 2})
    memory = FunctionMemory(25_000 * op_tree.BYTES_PER_ROW, "a test's")

    results = build_marts(con, sql_root=root, memory=memory)
    assert [r.row_count for r in results] == [100]
    assert con.execute("select count(*), sum(ranges) from piece_trees").fetchall() == [(100, 100_000)]
    assert sorted(calls) == [25_000] * 4  # 25 pieces a batch

    with pytest.raises(RuntimeError, match=r"piece_trees\.sql: part 1 holds 1,000 rows, more than the 999 that the "
                                           r"memory limit \(a test's\) lets one call"):
        build_marts(con, sql_root=root, memory=FunctionMemory(999 * op_tree.BYTES_PER_ROW, "a test's"))


def _memory_limit(con: duckdb.DuckDBPyConnection) -> str:
    return con.execute("select current_setting('memory_limit')").fetchone()[0]


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {name for (name,) in con.execute("select table_name from duckdb_tables()").fetchall()}
