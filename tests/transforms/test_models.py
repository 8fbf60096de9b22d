"""The SQL model graph: every model parses, resolves, is ordered, and every mart follows the naming contract."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipelines.tables import RAW_TABLES
from transforms.graph import chain_lengths, readers, run_order
from transforms.models import default_sql_root, discover_fleet_views, discover_models

CONTRACT = Path(__file__).resolve().parents[2].parent / "shared" / "CONTRACT.md"
MODELS = discover_models()


# Contract tables the project has not built yet (each an open issue), left out of the contract checks.
NOT_YET_BUILT: dict[str, str] = {}


def contract_tables() -> dict[str, tuple[list[str], list[str]]]:
    """Analysis table → (grain columns, other columns) as CONTRACT.md lists them, less :data:`NOT_YET_BUILT`."""
    tables = {}
    text = CONTRACT.read_text()
    for line in text[text.index("## Analysis tables") :].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`") and cells[0] != "`table`":
            grain = [c.strip() for c in cells[1].split(",")]
            columns = [c.strip() for c in re.sub(r"\(.*?\)", "", cells[2]).split(",") if c.strip() != "—"]
            tables[cells[0].strip("`")] = (grain, [c for c in columns if c])
    return {table: spec for table, spec in tables.items() if table not in NOT_YET_BUILT}


def test_models_resolve_and_order() -> None:
    order = run_order(MODELS, set(RAW_TABLES))
    assert set(order) == set(MODELS)
    for name in order:
        assert MODELS[name].deps & set(MODELS) <= set(order[: order.index(name)])


def test_each_model_is_kept_until_its_readers_have_run() -> None:
    order = run_order(MODELS, set(RAW_TABLES))
    read_by = readers(MODELS, order)
    assert set(read_by) == set(order)
    view = "int_tb_gpu_segments"
    assert MODELS[view].materialized == "view"
    for name in order:
        # what a model reads, through views too, is kept until it has run
        reads = set(MODELS[name].deps) | (set(MODELS[view].deps) if view in MODELS[name].deps else set())
        for dep in reads & set(MODELS):
            assert name in read_by[dep], (dep, name)
    assert read_by["int_host_ranges"] == {"int_op_tree_ranges", "int_op_nodes", "int_launch_holders"}


def test_longest_chains_start_first() -> None:
    order = run_order(MODELS, set(RAW_TABLES))
    read_by = readers(MODELS, order)
    chain = chain_lengths(read_by, order)
    for name in order:
        # a model's chain is one longer than its longest reader's, and a model nothing reads ends one
        assert chain[name] == 1 + max((chain[r] for r in read_by[name]), default=0)
    assert chain["int_host_ranges"] > chain["int_op_nodes"] > chain["op_stats"] == 1


def test_sql_root_exists() -> None:
    assert (default_sql_root() / "marts").is_dir()


@pytest.mark.skipif(not CONTRACT.is_file(), reason="CONTRACT.md not found beside the repository")
def test_every_mart_declares_the_contract_grain() -> None:
    models = MODELS | discover_fleet_views()  # the tables across runs are views of sql/fleet/
    for table, (grain, _) in contract_tables().items():
        if table in ("traces",):  # a raw table, written at ingest
            continue
        assert table in models, f"missing mart {table}"
        # A mart may add grain columns after the contract's (e.g. trace_id, so windows of one rank stay apart).
        assert list(models[table].grain)[: len(grain)] == grain, table


def test_dependencies_come_from_the_sql_and_exclude_ctes() -> None:
    # int_op_tree_ranges reads its ranges through CTEs (tree_nodes, threads, launched, ...) that are not tables
    assert MODELS["int_op_tree_ranges"].deps == {
        "int_host_ranges", "runtime_calls", "int_kernels_classified", "int_step_buckets", "int_degenerate_ids",
        "int_launch_holders", "int_launch_ops"}
    # unions, subqueries and joins count too
    assert MODELS["int_host_ranges"].deps == {"cpu_ops", "annotations", "python_functions"}
    assert MODELS["memory_by_op"].deps == {"int_memory_records", "int_op_nodes"}


def test_a_model_that_does_not_parse_is_named(tmp_path: Path) -> None:
    (tmp_path / "marts").mkdir()
    (tmp_path / "marts" / "broken.sql").write_text("-- grain: run_id\nselect from where\n")
    with pytest.raises(ValueError, match=r"broken\.sql: SQL does not parse: syntax error"):
        discover_models(tmp_path)


def test_an_edited_model_is_parsed_again(tmp_path: Path) -> None:
    (tmp_path / "marts").mkdir()
    model = tmp_path / "marts" / "kernel_count.sql"
    model.write_text("-- grain: run_id\nselect run_id, count(*) as n from kernels group by run_id\n")
    assert discover_models(tmp_path)["kernel_count"].deps == {"kernels"}
    model.write_text("-- grain: run_id\nselect run_id, count(*) as n from cpu_ops group by run_id\n")
    assert discover_models(tmp_path)["kernel_count"].deps == {"cpu_ops"}
    (tmp_path / "marts" / "op_count.sql").write_text("-- grain: run_id\nselect run_id from cpu_ops\n")
    assert set(discover_models(tmp_path)) == {"kernel_count", "op_count"}
