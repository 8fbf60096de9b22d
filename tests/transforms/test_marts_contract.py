"""Built analysis tables carry CONTRACT.md's columns, in its order, with int64 times and sizes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines.lake.lake import Lake
from pipelines.lake.read import open_lake
from pipelines.sources import discover_runs
from tests.transforms.test_models import CONTRACT, contract_tables
from transforms.composition.ingest import ingest_run


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, gloo_traces_dir: Path, shared_traces: Path) -> Path:
    """A lake of a GPU NCCL trace and a 2-rank gloo job, every mart built."""
    source = tmp_path_factory.mktemp("source")
    shutil.copytree(gloo_traces_dir / "gloo_ddp", source / "gloo_ddp")
    shutil.copytree(shared_traces / "nccl_rank0_of_2", source / "nccl_rank0_of_2")
    root = tmp_path_factory.mktemp("lake")
    lake = Lake(str(root))
    for run in discover_runs(str(source)):
        ingest_run(run, lake)
    return root


@pytest.mark.skipif(not CONTRACT.is_file(), reason="CONTRACT.md not found beside the repository")
def test_columns_follow_the_contract(lake: Path) -> None:
    con = open_lake(str(lake))
    for table, (grain, columns) in contract_tables().items():
        described = con.execute(f"select column_name, column_type from (describe {table})").fetchall()
        names = [name for name, _ in described]
        expected = [c for c in grain + columns if c != "trace_id" or c in grain or table == "traces"]
        present = [n for n in names if n in expected]
        assert present == expected, f"{table}: {names}"
        for name, kind in described:
            if name.endswith(("_ns", "_bytes")):
                assert kind == "BIGINT", f"{table}.{name} is {kind}"
            if name.endswith("_ratio"):
                assert kind == "DOUBLE", f"{table}.{name} is {kind}"


def test_every_table_has_rows_for_the_gpu_run(lake: Path) -> None:
    con = open_lake(str(lake))
    empty = [
        table for table in contract_tables()
        if table not in ("memory_timeline", "memory_peaks", "memory_by_op")  # that trace has no [memory] events
        # nor stacks, nn.Module ranges or input shapes
        and table not in ("source_stats", "module_stats", "op_perf", "step_mfu")
        # one rank: no straggler; its shallowest aten ops launch fewer than 2 device events each
        and table not in ("stragglers", "straggler_steps", "kernel_sequences")
        and table != "straggler_history"  # a job's ranks across its runs: no run_id of its own
        and table != "pipeline_stages"  # a DDP job: no pipeline
        and con.execute(f"select count(*) from {table} where run_id = 'nccl_rank0_of_2'").fetchone()[0] == 0
    ]
    assert empty == []


def test_a_failed_check_lands_in_quality_issues_saying_why(lake: Path) -> None:
    """nccl_rank0_of_2 holds one rank of two: collectives:all_ranks_matched fails, and the run's issues say so."""
    con = open_lake(str(lake))
    rows = con.execute(
        "select severity, count, message from quality_issues "
        "where run_id = 'nccl_rank0_of_2' and code = 'check_failed:collectives:all_ranks_matched'"
    ).fetchall()
    assert len(rows) == 1
    severity, count, message = rows[0]
    assert severity == "warning" and count > 0 and "seen on ranks [0] of 2" in message
    assert con.execute("select count(*) from quality_issues where run_id = 'gloo_ddp' "
                       "and code like 'check_failed:%'").fetchone() == (0,)
