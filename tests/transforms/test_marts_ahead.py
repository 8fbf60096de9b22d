"""A staged run's marts built ahead are taken over by its commit, only with the same selection and settings; a
build that failed fails the commit with its error and commits nothing; the build's scratch folder goes once its
commit ends, or once let go and ended."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from pipelines.commit import tables_holding_run
from pipelines.ingest import StagedRun
from pipelines.lake import Lake
from pipelines.scratch import PREFIX
from pipelines.sources import discover_runs
from tests.support.servers import EXAMPLE_TRACES
from transforms import pipeline
from transforms.pipeline import build_marts_ahead, commit_staged_run, discard_marts_ahead, stage_run

RUN = "simple_add"


@pytest.fixture
def staged(tmp_path: Path, scratch_root: Path) -> tuple[Lake, StagedRun]:
    shutil.copytree(EXAMPLE_TRACES / RUN, tmp_path / "traces" / RUN, ignore=shutil.ignore_patterns("*.md"))
    lake = Lake(str(tmp_path / "lake"))
    (run,) = discover_runs(str(tmp_path / "traces"))
    return lake, stage_run(run, lake)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[set[str] | None]:
    """The selection of every build of marts from now on, ahead or not (the real builds, counted)."""
    selections: list[set[str] | None] = []
    build = pipeline.build_marts

    def counted(con: duckdb.DuckDBPyConnection, *, select: set[str] | None = None) -> list:
        selections.append(select)
        return build(con, select=select)

    monkeypatch.setattr(pipeline, "build_marts", counted)
    return selections


def _marts_folders(root: Path) -> set[Path]:
    return set(root.glob(f"{PREFIX}{os.getpid()}-marts-*"))


def _mart_rows(lake: Lake) -> dict[str, int]:
    with lake.connect(read_only=True) as con:
        tables = con.execute("select table_name from duckdb_tables() where database_name = 'lake' "
                             "and schema_name = 'marts'").fetchall()
        return {t: con.execute(f"select count(*) from lake.marts.{t}").fetchone()[0] for (t,) in tables}


def _gone(folders: Callable[[], set[Path]]) -> bool:
    deadline = time.monotonic() + 120
    while folders() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not folders()


def test_the_commit_takes_over_the_marts_built_ahead(
    staged: tuple[Lake, StagedRun], builds: list, scratch_root: Path, tmp_path: Path
) -> None:
    lake, run = staged
    before = time.perf_counter()
    build_marts_ahead(lake, run)
    committed = commit_staged_run(lake, run)
    assert builds == [None]  # one build: the one ahead
    assert before <= committed.started_at and len(committed.marts) > 20
    assert not _marts_folders(scratch_root)

    # the same tables as a commit that builds its own
    other = Lake(str(tmp_path / "other"))
    commit_staged_run(other, stage_run(discover_runs(str(tmp_path / "traces"))[0], other))
    assert _mart_rows(lake) == _mart_rows(other) != {}


def test_another_selection_builds_its_own_and_lets_the_one_ahead_go(
    staged: tuple[Lake, StagedRun], builds: list, scratch_root: Path
) -> None:
    lake, run = staged
    build_marts_ahead(lake, run)
    committed = commit_staged_run(lake, run, select={"kernel_stats"})
    assert builds == [None, {"kernel_stats"}]
    assert [m.name for m in committed.marts] == ["kernel_stats"]
    assert _gone(lambda: _marts_folders(scratch_root))


def test_a_build_ahead_that_failed_fails_the_commit_and_commits_nothing(
    staged: tuple[Lake, StagedRun], monkeypatch: pytest.MonkeyPatch, scratch_root: Path
) -> None:
    lake, run = staged

    def broken(con: duckdb.DuckDBPyConnection, *, select: set[str] | None = None) -> list:
        raise RuntimeError("sql/marts/kernel_stats.sql: Binder Error: column not found")

    monkeypatch.setattr(pipeline, "build_marts", broken)
    build_marts_ahead(lake, run)
    with pytest.raises(RuntimeError, match="kernel_stats.sql: Binder Error"):
        commit_staged_run(lake, run)
    with lake.connect(read_only=True) as con:
        assert tables_holding_run(con, RUN) == set()  # not even the raw tables
    assert not _marts_folders(scratch_root)


def test_marts_ahead_no_commit_took_are_let_go(
    staged: tuple[Lake, StagedRun], builds: list, scratch_root: Path
) -> None:
    lake, run = staged
    build_marts_ahead(lake, run)
    discard_marts_ahead()  # returns at once; the folder goes when the build ends
    assert _gone(lambda: _marts_folders(scratch_root))
    commit_staged_run(lake, run)  # nothing left to take: built anew
    assert builds == [None, None]
