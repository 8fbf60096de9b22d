"""The lake as a DuckLake: concurrent ingests of one run, kills mid-ingest, direct Parquet reads, history,
migration from the 0.1 layout. Real processes (``tracelake ingest``), a real SQLite catalog and a real
PostgreSQL server on loopback; nothing is mocked."""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import orjson
import pytest

from pipelines.lake.lake import CREATED_KEY, LAYERS, Lake
from pipelines.lake.maintenance import run_history
from pipelines.lake.read import open_lake
from pipelines.sources import discover_runs
from tests.support.servers import EXAMPLE_TRACES
from transforms.composition import steps
from transforms.composition.ingest import IngestSettings, ingest_run, rebuild_run
from transforms.composition.steps import BuildSettings

RUN = "job"


def _source(root: Path, sample: str) -> Path:
    """A source whose one run ``job`` holds the example run ``sample``'s trace."""
    (root / RUN).mkdir(parents=True)
    for trace in (EXAMPLE_TRACES / sample).glob("*.json.gz"):
        shutil.copy(trace, root / RUN / trace.name)
    return root


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two sources of the same run with different traces: each ingest of one is a recognisable version."""
    root = tmp_path_factory.mktemp("versions")
    return {"a": _source(root / "a", "simple_add"), "b": _source(root / "b", "rocm_mi250")}


def _ingest(source: Path, lake: Path, catalog: str | None, **popen) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "tracelake.cli", "ingest", str(source), "--lake", str(lake)]
    command += ["--catalog", catalog] if catalog else []
    env = {**os.environ, "DAGSTER_HOME": str(lake.parent / "dagster")}  # new for each test: opened by all at once
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, **popen)


def _trace_of(version: Path) -> str:
    (trace,) = [p.name.split(".")[0] for p in (version / RUN).iterdir()]
    return trace


def assert_one_whole_version(lake: Path, catalog: str | None, allowed: set[str]) -> str:
    """The run holds exactly one version, whole: raw and analysis tables describe the same trace. Returns it."""
    con = open_lake(str(lake), catalog=catalog)
    # One statement reads one snapshot of every table it names.
    (traces, kernel_traces, stat_traces, kernels, calls, run_traces) = con.execute(
        """
        select
            (select list(distinct trace_id) from traces where run_id = $run),
            (select list(distinct trace_id) from kernels where run_id = $run),
            (select list(distinct trace_id) from kernel_stats where run_id = $run),
            (select count(*) from kernels where run_id = $run),
            (select sum(calls) from kernel_stats where run_id = $run),
            (select trace_count from runs where run_id = $run)
        """,
        {"run": RUN},
    ).fetchone()
    assert len(traces) == 1 and traces[0] in allowed, traces
    assert kernel_traces == stat_traces == traces
    assert kernels == calls and kernels > 0 and run_traces == 1
    return traces[0]


@pytest.mark.slow
def test_concurrent_ingests_of_one_run_end_with_one_whole_version(tmp_path, versions, catalog) -> None:
    lake = tmp_path / "lake"
    names = {_trace_of(v) for v in versions.values()}
    for _ in range(3):
        writers = [_ingest(versions[v], lake, catalog) for v in ("a", "b", "a")]
        outputs = [w.communicate(timeout=300)[0].decode() for w in writers]
        assert [w.returncode for w in writers] == [0, 0, 0], "\n".join(outputs)
        assert_one_whole_version(lake, catalog, names)


@pytest.mark.slow
def test_concurrent_ingests_of_different_runs_all_land(tmp_path, catalog) -> None:
    lake = tmp_path / "lake"
    sources = []
    for sample in ("simple_add", "rocm_mi250", "nccl_rank0_of_2"):
        (tmp_path / sample / sample).mkdir(parents=True)
        for trace in (EXAMPLE_TRACES / sample).glob("*.json.gz"):
            shutil.copy(trace, tmp_path / sample / sample / trace.name)
        sources.append(tmp_path / sample)
    writers = [_ingest(source, lake, catalog) for source in sources]
    outputs = [w.communicate(timeout=300)[0].decode() for w in writers]
    assert [w.returncode for w in writers] == [0, 0, 0], "\n".join(outputs)
    con = open_lake(str(lake), catalog=catalog)
    assert sorted(r[0] for r in con.execute("select run_id from runs").fetchall()) == sorted(s.name for s in sources)
    assert con.execute("select count(distinct run_id) from kernel_stats").fetchone()[0] == 3


@pytest.mark.slow
def test_a_kill_mid_ingest_leaves_the_previous_version_whole(tmp_path, versions) -> None:
    lake = tmp_path / "lake"
    first = _ingest(versions["a"], lake, None)
    assert first.wait(timeout=300) == 0
    names = {_trace_of(v) for v in versions.values()}
    rng = random.Random(7)
    seen = set()
    for _ in range(5):
        writer = _ingest(versions["b" if len(seen) % 2 == 0 else "a"], lake, None, start_new_session=True)
        time.sleep(rng.uniform(0.5, 6.0))
        os.killpg(writer.pid, signal.SIGKILL)
        writer.wait()
        seen.add(assert_one_whole_version(lake, None, names))
    last = _ingest(versions["b"], lake, None)
    assert last.wait(timeout=300) == 0, last.stdout.read().decode()
    assert assert_one_whole_version(lake, None, names) == _trace_of(versions["b"])



def test_a_rebuild_of_the_marts_never_lands_beside_a_newer_ingest(tmp_path, versions, catalog, monkeypatch) -> None:
    """While a run's marts are rebuilt over version a, an ingest commits version b: the rebuild builds them again
    over b instead of committing a's marts beside b's raw tables."""
    lake = Lake(str(tmp_path / "lake"), catalog=catalog)
    (run_a,), (run_b,) = discover_runs(str(versions["a"])), discover_runs(str(versions["b"]))
    ingest_run(run_a, lake)
    build = steps.build_marts
    builds = []

    def then_ingest_b(*args, **kwargs):
        marts = build(*args, **kwargs)
        builds.append(len(marts))
        if len(builds) == 1:
            ingest_run(run_b, lake)  # builds b's marts too: the second build
        return marts

    monkeypatch.setattr(steps, "build_marts", then_ingest_b)
    rebuilt = rebuild_run(lake, RUN)
    assert len(builds) == 3 and rebuilt.commit.attempts == 1
    assert assert_one_whole_version(Path(lake.url), catalog, {_trace_of(versions["b"])})
    with lake.connect(read_only=True) as con:
        assert [v.marts_only for v in run_history(con, RUN)][-1:] == [True]


def test_direct_parquet_reads_equal_catalog_reads_after_reingests(tmp_path, versions) -> None:
    lake = Lake(str(tmp_path / "lake"))
    for version in ("a", "b", "a"):
        (run,) = discover_runs(str(versions[version]))
        ingest_run(run, lake, settings=IngestSettings(build=BuildSettings(threads=1)))
    con = open_lake(lake.url)
    tables = con.execute("select schema_name, table_name from duckdb_tables() "
                         "where database_name = 'lake' and schema_name != 'meta'").fetchall()
    assert {schema for schema, _ in tables} == set(LAYERS) and len(tables) > 30
    for schema, table in tables:
        catalog_rows = con.execute(f"select run_id, count(*) from {table} group by all order by all").fetchall()
        glob = f"{lake.url}/{schema}/{table}/**/*.parquet"
        direct = con.execute(
            f"select run_id, count(*) from read_parquet('{glob}', hive_partitioning = false, union_by_name = true) "
            "group by all order by all"
        ).fetchall() if list(Path(lake.url, schema, table).rglob("*.parquet")) else []
        assert direct == catalog_rows, table
    staging = Path(lake.url, "_staging")
    # Only committed versions' placed files stay staged (for the retention), none of a version not committed.
    assert all((version / ".settled").exists() for version in staging.glob("*/*")), "staged files outlived their commits"


def test_history_lists_the_versions_that_retention_keeps(tmp_path, versions) -> None:
    lake = Lake(str(tmp_path / "lake"))
    keep = IngestSettings(build=BuildSettings(threads=1), retention="1 hour")
    for version in ("a", "b"):
        (run,) = discover_runs(str(versions[version]))
        ingest_run(run, lake, settings=keep)
    with lake.connect(read_only=True) as con:
        history = run_history(con, RUN)
        assert len(history) == 2 and history[0].snapshot_id < history[1].snapshot_id
        assert history[0].fingerprint != history[1].fingerprint
        as_of = con.execute(
            f"select distinct trace_id from lake.raw.kernels at (version => {history[0].snapshot_id}) where run_id = $r",
            {"r": RUN},
        ).fetchall()
    assert as_of == [(_trace_of(versions["a"]),)]


def test_a_legacy_lake_is_refused_then_migrated(tmp_path, versions) -> None:
    """A 0.1 lake (manifests naming Parquet files) is refused with the command that converts it, which does."""
    legacy = tmp_path / "legacy"
    files = {}
    for layer, table in (("raw", "kernels"), ("marts", "kernel_stats")):
        path = legacy / layer / table / f"run_id={RUN}" / "v1-sabcdef012345-t.parquet"
        path.parent.mkdir(parents=True)
        duckdb.sql(f"copy (select 't' as trace_id, 0::bigint as rank, range as dur_ns from range(3)) to '{path}'")
        files[layer] = {table: [str(path.relative_to(legacy))]}
    for layer, tables in files.items():
        manifest = legacy / "_manifests" / layer / f"{RUN}.json"
        manifest.parent.mkdir(parents=True)
        manifest.write_bytes(orjson.dumps({"run_id": RUN, "layer": layer, "version": "v1", "committed_at": "",
                                           "tables": tables}))
    refused = subprocess.run([sys.executable, "-m", "tracelake.cli", "sql", "select 1", "--lake", str(legacy)],
                             capture_output=True, text=True)
    assert refused.returncode == 2 and f"tracelake migrate --lake {legacy}" in refused.stderr, refused.stderr
    migrated = subprocess.run([sys.executable, "-m", "tracelake.cli", "migrate", "--lake", str(legacy)],
                              capture_output=True, text=True)
    assert migrated.returncode == 0, migrated.stderr
    con = open_lake(str(legacy))
    assert con.execute("select run_id, sum(dur_ns) from kernels group by all").fetchall() == [(RUN, 3)]
    assert con.execute("select count(*) from kernel_stats").fetchone() == (3,)
    assert not (legacy / "_manifests").exists()
    assert sorted(p.name for p in legacy.rglob("*.parquet") if p.name.startswith("v1-")) == []


def test_maintenance_job_sweeps_what_killed_ingests_left(tmp_path, versions) -> None:
    """Staged files and orphaned data files older than the leftover age go; committed data stays (Dagster's job)."""
    from dagster_project.definitions import defs
    from dagster_project.resources import LakeResource

    lake = Lake(str(tmp_path / "lake"))
    (run,) = discover_runs(str(versions["a"]))
    ingest_run(run, lake, settings=IngestSettings(build=BuildSettings(threads=1)))
    before = open_lake(lake.url).execute("select count(*) from kernels").fetchone()
    # A lake made five days ago (only files written since its catalog was created can be its leftovers).
    with sqlite3.connect(lake.catalog.path) as catalog:
        catalog.execute("update ducklake_metadata set value = ? where key = ?",
                        (datetime.fromtimestamp(time.time() - 5 * 86400, UTC).isoformat(), CREATED_KEY))
    stale = time.time() - 3 * 86400
    leftovers = [Path(lake.url, "_staging", "0123456789abcdef", "20240101T000000-dead", "kernels", "x.parquet"),
                 Path(lake.url, "raw", "kernels", f"run_id={RUN}", "ducklake-killed.parquet")]
    for path in leftovers:
        path.parent.mkdir(parents=True, exist_ok=True)
        duckdb.sql(f"copy (select '{RUN}' as run_id, 1 as x) to '{path}'")
        os.utime(path, (stale, stale))
    job = defs.resolve_job_def("maintain_lake_job")
    assert job.execute_in_process(resources={"lake": LakeResource(url=lake.url)}).success
    assert not any(path.exists() for path in leftovers)
    assert open_lake(lake.url).execute("select count(*) from kernels").fetchone() == before
