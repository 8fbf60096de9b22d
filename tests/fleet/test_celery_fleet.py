"""A real distributed deployment on loopback: the sensor alone ingests multi-rank runs whose steps run on two
Celery workers (separate processes, separate working directories, sharing only PostgreSQL, Redis and S3); then a
worker is killed in the middle of a run, and re-executing that run from failure completes the lake consistently.

Everything runs from tracelake installed from its wheel (tests/support/installed.py); the lake-specific parts
(where the lake is, how to read it) are in the "Lake" section below.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest
from celery import Celery

from tests.support.databases import PostgresServer, RedisServer
from tests.support.fleet import WORKER_METADATA, run_fleet, worker_hostname
from tests.support.installed import InstalledVenv
from tests.support.s3 import S3Server
from tests.support.servers import wait_for
from tracelake.ingest import ingest
from tracelake.workloads import GLOO_RUN_ID

pytestmark = pytest.mark.slow

WORKERS = ("worker-a", "worker-b")
# Traces without distributedInfo: copies named rank-N.* are N distinct ranks of one run.
SMALL = "edge_cases/distributed_info_not_found.json.gz"  # 46 KB
LARGE = "tb_plugin_resnet50/worker0.1623143089861.pt.trace.json.gz"  # 1.1 MB, 75k events: seconds to parse
TERMINATE = """mutation($runId: String!) {
  terminateRun(runId: $runId, terminatePolicy: MARK_AS_CANCELED_IMMEDIATELY) {
    __typename ... on TerminateRunFailure { message } ... on PythonError { message } } }"""
REEXECUTE = """mutation($runId: String!) {
  launchRunReexecution(reexecutionParams: {parentRunId: $runId, strategy: FROM_FAILURE}) {
    __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""


# ---- Lake: where the fleet's lake is and how the test reads it (adapt here when the lake's addressing changes).

def lake_env(postgres: PostgresServer) -> dict[str, str]:
    """The lake settings every fleet process gets: data on SeaweedFS, the DuckLake catalog on PostgreSQL."""
    return {"TRACELAKE_LAKE": "s3://fleet-lake/tracelake",
            "TRACELAKE_CATALOG": postgres.url(postgres.create_database("fleet_lake"))}


def make_lake_storage(s3: S3Server) -> None:
    s3.make_bucket("fleet-lake")


def row_counts(
    lake: str, monkeypatch: pytest.MonkeyPatch, s3: S3Server | None = None, catalog: str | None = None
) -> dict[str, dict[str, int]]:
    """Rows per run of every table of the lake (raw tables and marts; not the views over every run, which have no
    run_id): {table: {run_id: rows}}."""
    import tracelake
    from pipelines.lake.fleet_views import fleet_view_sql
    from pipelines.lake.read import table_names

    for key, value in (s3.env() if s3 else {}).items():
        monkeypatch.setenv(key, value)
    con = tracelake.open_lake(lake, catalog=catalog)
    tables = sorted(table_names(con) - set(fleet_view_sql()))
    return {t: dict(con.sql(f'select run_id, count(*) from "{t}" group by run_id').fetchall()) for t in tables}


# ---- Dagster's own record of what ran where.

def _steps_by_worker(instance: dg.DagsterInstance, run_id: str) -> dict[str, str]:
    """step key → Celery node name that executed it, from the celery task's engine events."""
    placed = {}
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        metadata = record.dagster_event.event_specific_data.metadata or {}
        if WORKER_METADATA in metadata:
            placed[record.step_key] = metadata[WORKER_METADATA].value
    return placed


def _succeeded_steps(instance: dg.DagsterInstance, run_id: str) -> set[str]:
    return {r.step_key for r in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_SUCCESS)}


def _runs(instance: dg.DagsterInstance) -> dict[str, dg.DagsterRun]:
    """Runs by partition (the run folder), failing the test on any failed run with its step errors."""
    runs = {}
    for run in instance.get_runs():
        if run.status == dg.DagsterRunStatus.FAILURE:
            pytest.fail(f"run {run.tags.get('dagster/partition')} failed:\n{_errors(instance, run.run_id)}")
        runs.setdefault(run.tags.get("dagster/partition", "?"), run)
    return runs


def _errors(instance: dg.DagsterInstance, run_id: str) -> str:
    """The messages and errors of a run's failure events (step, run, engine)."""
    lines = []
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        error = getattr(event.event_specific_data, "error", None) if event else None
        if error or (event and event.is_failure):
            lines.append(f"{record.step_key or 'run'}: {record.user_message}\n{error.to_string() if error else ''}")
    return "\n".join(lines)[-6000:]


def _succeeded(instance: dg.DagsterInstance, partitions: set[str]) -> bool:
    runs = _runs(instance)
    return partitions <= set(runs) and all(runs[p].status == dg.DagsterRunStatus.SUCCESS for p in partitions)


def _put_run(s3: S3Server, shared_traces: Path, staging: Path, run_id: str, trace: str, ranks: int) -> None:
    """Upload ``ranks`` copies of a shared trace as ranks 0..n-1 of ``run_id`` (and keep a local copy)."""
    folder = staging / run_id
    folder.mkdir(parents=True)
    for rank in range(ranks):
        shutil.copy(shared_traces / trace, folder / f"rank-{rank}.pt.trace.json.gz")
    s3.upload_folder("fleet-traces", f"runs/{run_id}", folder)


def _idle(broker: str, node: str) -> bool:
    """Whether the Celery worker ``node`` has no task running or reserved (asked over the broker)."""
    inspect = Celery(broker=broker).control.inspect(destination=[node], timeout=2)
    active, reserved = inspect.active() or {}, inspect.reserved() or {}
    return node in active and not active[node] and not reserved.get(node)


def test_sensor_runs_spread_over_workers_and_a_lost_worker_is_recovered_from_failure(
    fleet_install: InstalledVenv, postgres_server: PostgresServer, redis_server: RedisServer,
    seaweedfs_s3: S3Server, shared_traces: Path, gloo_traces_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s3 = seaweedfs_s3
    s3.make_bucket("fleet-traces")
    make_lake_storage(s3)
    lake = lake_env(postgres_server)
    staging = tmp_path / "traces"  # the same files, for a local reference ingest
    shutil.copytree(gloo_traces_dir / GLOO_RUN_ID, staging / GLOO_RUN_ID)
    s3.upload_folder("fleet-traces", f"runs/{GLOO_RUN_ID}", staging / GLOO_RUN_ID)  # 2 real gloo ranks
    _put_run(s3, shared_traces, staging, "small_x3", SMALL, ranks=3)
    _put_run(s3, shared_traces, staging, "large_x2", LARGE, ranks=2)

    with run_fleet(tmp_path / "fleet", fleet_install, postgres=postgres_server, redis=redis_server, s3=s3,
                   lake_env=lake, source="s3://fleet-traces/runs", workers=WORKERS) as fleet:
        instance = fleet.instance
        first = {GLOO_RUN_ID, "small_x3", "large_x2"}
        wait_for(lambda: _succeeded(instance, first), timeout=600, interval=2, what=f"sensor runs {sorted(first)}")
        runs = _runs(instance)
        placement = {p: _steps_by_worker(instance, runs[p].run_id) for p in first}
        hosts = {worker_hostname(w) for w in WORKERS}
        # Every step of every run went through a Celery worker; both workers ran steps of one run.
        for partition, placed in placement.items():
            assert set(placed) == _succeeded_steps(instance, runs[partition].run_id), partition
            assert set(placed.values()) <= hosts, partition
        assert any(set(placed.values()) == hosts for placed in placement.values()), placement

        # A run of four large traces; kill worker-b while it parses one of them.
        _put_run(s3, shared_traces, staging, "killed_x4", LARGE, ranks=4)
        victim = worker_hostname("worker-b")

        def parsing_on_victim() -> str | None:
            run = _runs(instance).get("killed_x4")
            if run is None:
                return None
            done = _succeeded_steps(instance, run.run_id)
            busy = [s for s, n in _steps_by_worker(instance, run.run_id).items()
                    if n == victim and s not in done and "parse_trace" in s]
            return run.run_id if busy else None

        killed_run = wait_for(parsing_on_victim, timeout=300, interval=0.2, what="worker-b parsing a trace")
        fleet.kill("worker-b")
        lost = {s for s, n in _steps_by_worker(instance, killed_run).items() if n == victim} - _succeeded_steps(
            instance, killed_run)
        assert lost, "the killed worker's step had already finished"
        # worker-a finishes what it can; the run then waits on the lost task: Celery acknowledged it on delivery.
        wait_for(lambda: _idle(fleet.env["TRACELAKE_CELERY_BROKER"], worker_hostname("worker-a")),
                 timeout=300, interval=2, what="worker-a idle")
        assert instance.get_run_by_id(killed_run).status == dg.DagsterRunStatus.STARTED
        assert not lost & _succeeded_steps(instance, killed_run)

        # The operator's two clicks: terminate the stuck run, re-execute it from failure.
        assert fleet.graphql(TERMINATE, runId=killed_run)["terminateRun"]["__typename"] == "TerminateRunSuccess"
        launched = fleet.graphql(REEXECUTE, runId=killed_run)["launchRunReexecution"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        retry = launched["run"]["runId"]
        wait_for(lambda: instance.get_run_by_id(retry).status in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE),
                 timeout=600, interval=2, what="the re-execution")
        assert instance.get_run_by_id(retry).status == dg.DagsterRunStatus.SUCCESS, fleet.log("worker-a")
        plan = instance.get_execution_plan_snapshot(instance.get_run_by_id(killed_run).execution_plan_snapshot_id)
        # The plan's static steps, and the parse step each of the four traces fanned out to.
        steps = {s.key for s in plan.steps if not s.key.endswith("[?]")}
        steps |= {f"raw_tables.parse_trace[rank_{rank}_pt_trace]" for rank in range(4)}
        reran = _steps_by_worker(instance, retry)
        # Nothing that had succeeded ran again; the commit and what follows it did, all on the surviving worker.
        # (A lost parse step that had not logged its start is not re-run by Dagster: the commit step parses it.)
        assert set(reran) <= steps - _succeeded_steps(instance, killed_run)
        assert {"raw_tables.stage_raw_tables", "marts", "report"} <= set(reran)
        assert set(reran.values()) == {worker_hostname("worker-a")}

    # The fleet's lake holds exactly what one local ingest of the same files makes.
    assert ingest(str(staging), str(tmp_path / "reference_lake")) == 0
    reference = row_counts(str(tmp_path / "reference_lake"), monkeypatch)
    fleet_lake = row_counts(lake["TRACELAKE_LAKE"], monkeypatch, s3, catalog=lake["TRACELAKE_CATALOG"])
    assert fleet_lake == reference
    assert set(reference["traces"]) == {GLOO_RUN_ID, "small_x3", "large_x2", "killed_x4"}
    assert reference["traces"]["killed_x4"] == 4
