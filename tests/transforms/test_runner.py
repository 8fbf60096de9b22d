"""Models built two at a time (``build_marts``): each sees what it reads, intermediates go once read, a model that
runs out of memory builds again with a larger buffer, and a failing model is named and stops the build."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from transforms.models import discover_models
from transforms.runner import OUT_OF_MEMORY_RETRY_FACTOR, build_marts, calls_functions, models_to_start


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


def test_a_model_out_of_memory_builds_again_with_a_larger_buffer(tmp_path: Path) -> None:
    # A list of a million BIGINTs is held whole (an aggregate state is not spilled): over a 16 MiB buffer, within 6x.
    root = _write_models(tmp_path, {
        "marts/listed.sql": "-- grain: run_id\nselect 'r' as run_id, len(list(range)) as n from range(1000000)",
    })
    con = duckdb.connect(config={"threads": 2, "memory_limit": "16MiB"})
    with pytest.raises(duckdb.OutOfMemoryException):
        con.execute("select len(list(range)) from range(1000000)").fetchall()
    assert OUT_OF_MEMORY_RETRY_FACTOR == 6

    assert [(r.name, r.preview) for r in build_marts(con, sql_root=root)] == [("listed", [("r", 1000000)])]
    assert _memory_limit(con) == "16.0 MiB"  # set back once built


def test_the_buffer_stays_raised_while_what_was_built_under_it_is_held(tmp_path: Path) -> None:
    # 48 MB of BIGINTs with nowhere to spill: built under the raised buffer, and over the first one until dropped
    # once read (setting the limit back then failed the whole build: seen on a 2 GB trace).
    root = _write_models(tmp_path, {
        "intermediate/int_numbers.sql": "select range as n, range * 2 as m from range(3000000)",
        "marts/total.sql": "-- grain: run_id\nselect 'r' as run_id, sum(n + m)::bigint as n from int_numbers",
    })
    con = duckdb.connect(config={"threads": 2, "memory_limit": "16MiB", "temp_directory": ""})
    with pytest.raises(duckdb.OutOfMemoryException):
        con.execute("create table held as select range as n, range * 2 as m from range(3000000)").fetchall()

    assert [(r.name, r.preview) for r in build_marts(con, sql_root=root)] == [("total", [("r", 13499995500000)])]
    assert _memory_limit(con) == "16.0 MiB"  # set back once the intermediate went


def test_a_model_out_of_memory_even_with_the_larger_buffer_is_named(tmp_path: Path) -> None:
    root = _write_models(tmp_path, {
        "marts/listed.sql": "-- grain: run_id\nselect 'r' as run_id, len(list(range)) as n from range(20000000)",
    })
    con = duckdb.connect(config={"threads": 2, "memory_limit": "16MiB"})
    with pytest.raises(RuntimeError, match=r"listed\.sql: out of memory with the buffer raised to 96MiB: Out of Memory Error"):
        build_marts(con, sql_root=root)
    assert _memory_limit(con) == "16.0 MiB"


def _memory_limit(con: duckdb.DuckDBPyConnection) -> str:
    return con.execute("select current_setting('memory_limit')").fetchone()[0]


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {name for (name,) in con.execute("select table_name from duckdb_tables()").fetchall()}
