"""Re-ingesting a run replaces its partition whole; a killed ingest leaves the previous contents intact."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipelines.lake.lake import Lake
from pipelines.lake.read import table_files
from tests.cli.conftest import REPO, sql_rows, tracelake

COUNTS = "select run_id, count(*) as n from kernels group by all order by run_id"


@pytest.fixture
def source(tmp_path: Path, shared_traces: Path) -> Path:
    root = tmp_path / "source"
    (root / "run_a").mkdir(parents=True)
    shutil.copy(shared_traces / "simple_add/alexnet_trace.json.gz", root / "run_a/rank-0.json.gz")
    shutil.copy(shared_traces / "edge_cases/tiny_base.json.gz", root / "run_a/rank-1.json.gz")
    return root


def parquet_files(lake: Path, run_id: str) -> list[Path]:
    return sorted(lake.glob(f"raw/*/run_id={run_id}/*.parquet"))


def committed_files(lake: Path, run_id: str) -> set[Path]:
    """The run's raw data files in the lake's current snapshot, as the catalog lists them."""
    with Lake(str(lake)).connect(read_only=True) as con:
        return {Path(url) for table, urls in table_files(con).items() for url in urls
                if f"/raw/{table}/run_id={run_id}/" in url}


def test_reingesting_a_run_leaves_no_duplicates(source: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    assert tracelake("ingest", str(source), "--lake", str(lake)).code == 0
    first, files = sql_rows(lake, COUNTS), parquet_files(lake, "run_a")
    assert first == [{"run_id": "run_a", "n": 79 + 6}]
    assert tracelake("ingest", str(source), "--lake", str(lake)).code == 0
    assert sql_rows(lake, COUNTS) == first
    again = parquet_files(lake, "run_a")
    assert len(again) == len(files) and not set(again) & set(files)  # one version on disk, all of it new
    assert set(again) == committed_files(lake, "run_a")  # plain Parquet globs see what the catalog does
    assert sql_rows(lake, "select count(*) as n from traces") == [{"n": 2}]


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    calls = {"n": 0}

    def dying_put(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > int(sys.argv[3]):
            os.kill(os.getpid(), signal.SIGKILL)  # a crash mid-write: some new files staged, no commit
        return real_put(*args, **kwargs)

    import pipelines.staging.trace
    real_put = pipelines.staging.trace.put_file
    pipelines.staging.trace.put_file = dying_put
    from tracelake.ingest import ingest
    sys.exit(ingest(sys.argv[1], sys.argv[2], record=False))
    """
)


@pytest.mark.parametrize("files_before_kill", [0, 12])
def test_killed_ingest_keeps_previous_contents(source: Path, tmp_path: Path, files_before_kill: int) -> None:
    lake = tmp_path / "lake"
    assert tracelake("ingest", str(source), "--lake", str(lake)).code == 0
    before = sql_rows(lake, COUNTS)
    traces_before = sql_rows(lake, "select trace_id, event_count from traces order by trace_id")
    # The run changes (a rank is rewritten), then an ingest of it is killed part-way through uploading.
    shutil.copy(REPO / "examples/traces/rocm_mi250/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
                source / "run_a/rank-1.json.gz")
    killed = subprocess.run(
        [sys.executable, "-c", KILLER, str(source), str(lake), str(files_before_kill)],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )
    assert killed.returncode == -9, killed.stderr
    assert sql_rows(lake, COUNTS) == before
    assert sql_rows(lake, "select trace_id, event_count from traces order by trace_id") == traces_before
    # The next ingest commits the new contents; the lake's data folders hold exactly the committed files.
    assert tracelake("ingest", str(source), "--lake", str(lake)).code == 0
    assert sql_rows(lake, COUNTS) == [{"run_id": "run_a", "n": 79 + 14}]
    assert set(parquet_files(lake, "run_a")) == committed_files(lake, "run_a")
