"""The local Dagster home: the dagster.yaml ``tracelake`` writes into a new home, its pooled event log storage
(the same records as Dagster's own SQLite storage reads, few connections, none holding a lock between uses),
and SQLite files that commit without fsync."""

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import psutil
import pytest
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.event_log import SqliteEventLogStorage
from sqlalchemy import create_engine, text

import dagster_project.home
from dagster_project.event_log import PooledSqliteEventLogStorage
from tests.cli.conftest import tracelake as run_tracelake
from tests.support.servers import EXAMPLE_TRACES
from dagster_project.home import POOLED_EVENT_LOG, QUIET, dagster_home, skip_history_fsync

FULL, OFF = 2, 0  # PRAGMA synchronous values


def _synchronous(path: Path) -> int:
    engine = create_engine(f"sqlite:///{path}")
    with engine.connect() as connection:
        return connection.execute(text("pragma synchronous")).scalar_one()


def test_only_the_home_skips_fsync(tmp_path: Path) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    assert _synchronous(home / "runs.db") == FULL
    skip_history_fsync(home)
    assert _synchronous(home / "runs.db") == OFF
    assert _synchronous(home / "storage.db") == OFF
    assert _synchronous(elsewhere / "catalog.db") == FULL


def test_a_new_home_names_the_pooled_event_log_a_users_own_stays(tmp_path: Path, monkeypatch) -> None:
    default, new, users = tmp_path / "default", tmp_path / "new", tmp_path / "users"
    default.mkdir()
    users.mkdir()
    (default / "dagster.yaml").write_text(QUIET)  # what the default home held before
    (users / "dagster.yaml").write_text(QUIET)  # the same text, of a user's own
    monkeypatch.setattr(dagster_project.home, "DEFAULT_HOME", default)

    for home in (default, new, users):
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        assert dagster_home() == home

    assert (default / "dagster.yaml").read_text() == QUIET + POOLED_EVENT_LOG
    assert (new / "dagster.yaml").read_text() == POOLED_EVENT_LOG  # telemetry is the user's to turn off
    assert (users / "dagster.yaml").read_text() == QUIET
    assert sorted(p.name for p in new.iterdir()) == ["dagster.yaml"]  # written whole, nothing left beside it
    monkeypatch.setenv("DAGSTER_HOME", str(new))
    with dg.DagsterInstance.get() as instance:
        assert type(instance.event_log_storage) is PooledSqliteEventLogStorage
        assert instance.event_log_storage._base_dir == str(new / "history" / "runs")  # where Dagster keeps it


def _recorded(instance: dg.DagsterInstance) -> dict:
    """What the UI shows of the home's one run: its status, its event log, each asset's materializations with
    their metadata, each check's evaluations, the partitions."""
    (run,), storage = instance.get_runs(), instance.event_log_storage
    logs = instance.all_logs(run.run_id)
    evaluated = dg.DagsterEventType.ASSET_CHECK_EVALUATION
    checks = {e.dagster_event.asset_check_evaluation_data.asset_check_key
              for e in logs if e.dagster_event_type == evaluated}
    return {
        "status": run.status,
        "logs": logs,
        "materializations": {
            key: [(r.run_id, r.asset_materialization.partition, r.asset_materialization.metadata)
                  for r in instance.fetch_materializations(key, limit=10).records]
            for key in instance.get_asset_keys()
        },
        "checks": {
            key: [(r.run_id, r.status) for r in storage.get_asset_check_execution_history(key, limit=10)]
            for key in checks
        },
        "partitions": instance.get_dynamic_partitions("trace_runs"),
    }


@pytest.mark.slow
def test_an_ingest_records_what_dagsters_own_storage_reads(tmp_path: Path, monkeypatch) -> None:
    home, plain_config = tmp_path / "home", tmp_path / "plain"
    plain_config.mkdir()
    (plain_config / "dagster.yaml").write_text("")  # Dagster's defaults
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    source, lake = EXAMPLE_TRACES / "simple_add", tmp_path / "lake"
    done = run_tracelake("ingest", str(source), "--lake", str(lake), env=env)
    assert done.code == 0, done.stdout + done.stderr

    monkeypatch.setenv("DAGSTER_HOME", str(home))
    plain_ref = InstanceRef.from_dir(str(home), config_dir=str(plain_config))
    with dg.DagsterInstance.get() as pooled, dg.DagsterInstance.from_ref(plain_ref) as plain:
        assert type(pooled.event_log_storage) is PooledSqliteEventLogStorage
        assert type(plain.event_log_storage) is SqliteEventLogStorage  # Dagster's default over the same files
        recorded = _recorded(pooled)
        assert recorded == _recorded(plain)

    (run_id,) = {entry.run_id for entry in recorded["logs"]}
    assert recorded["status"] == dg.DagsterRunStatus.SUCCESS
    assert recorded["partitions"] == ["simple_add"]
    assert len(recorded["materializations"]) > 30
    for key, materializations in recorded["materializations"].items():
        assert [(r, p) for r, p, _ in materializations] == [(run_id, "simple_add")], key
        assert materializations[0][2], key  # its metadata
    assert len(recorded["checks"]) > 5
    assert all([r for r, _ in executions] == [run_id] for executions in recorded["checks"].values())


@dg.asset(partitions_def=dg.DynamicPartitionsDefinition(name="parts"),
          check_specs=[dg.AssetCheckSpec("named", asset="tiny")])
def tiny(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """An asset with a check: each run writes its own shard and the index (materialization, check result)."""
    return dg.MaterializeResult(metadata={"partition": context.partition_key},
                                check_results=[dg.AssetCheckResult(check_name="named", passed=True)])


def _open_shards(home: Path) -> set[str]:
    # A set: SQLite keeps a closed connection's file open while another connection to it is (POSIX locks are
    # per process), to use again for the next.
    return {f.path for f in psutil.Process().open_files()
            if f.path.startswith(str(home)) and f.path.endswith(".db")}


def test_pooled_connections_stay_few_and_hold_no_lock_between_uses(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    dagster_home()
    monkeypatch.setattr(PooledSqliteEventLogStorage, "SHARDS_KEPT", 3)  # fewer runs to make than the 8 kept
    runs = 5
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions("parts", [f"p{i}" for i in range(runs)])
        for i in range(runs):
            assert dg.materialize([tiny], instance=instance, partition_key=f"p{i}").success
        for run in instance.get_runs():  # as the UI does, paging through every run's events
            assert len(instance.all_logs(run.run_id)) > 10

        shards = _open_shards(home)
        index = str(home / "history" / "runs" / "index.db")
        assert index in shards and len(shards) == 3
        for shard in shards:  # another process can write, and checkpoint the WAL: nothing held between uses
            other = sqlite3.connect(shard, timeout=0, isolation_level=None)
            other.execute("begin immediate")
            other.execute("commit")
            busy, _, _ = other.execute("pragma wal_checkpoint(truncate)").fetchone()
            assert busy == 0, shard
            other.close()
        assert dg.materialize([tiny], instance=instance, partition_key="p0").success  # and writing goes on
        assert len(instance.fetch_materializations(dg.AssetKey("tiny"), limit=100).records) == runs + 1


OPEN_AT = """
import sys, time
from tracelake.dagster_runs import instance
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))  # every process opens the new home at the same moment
instance().get_runs()
"""


def test_processes_opening_a_new_home_at_once_all_succeed_and_leave_it_whole(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    start = f"{time.time() + 8:.3f}"  # after every process has imported Dagster
    openers = [subprocess.Popen([sys.executable, "-c", OPEN_AT, start], env=env, stderr=subprocess.PIPE, text=True)
               for _ in range(4)]
    errors = [opener.communicate(timeout=120)[1] for opener in openers]
    assert [opener.returncode for opener in openers] == [0] * 4, "\n".join(errors)
    for database in home.rglob("*.db"):  # one schema version stamped each, or every later open fails
        with sqlite3.connect(database) as con:
            assert len(con.execute("select * from alembic_version").fetchall()) == 1, database
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.get_runs() == []


def test_a_home_that_will_not_open_is_one_line_naming_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with dg.DagsterInstance.from_config(str(home)):
        pass
    with sqlite3.connect(home / "history" / "runs.db") as con:  # as concurrent first opens left it before the lock
        con.execute("insert into alembic_version values ('5771160a95ad')")
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    done = run_tracelake("ingest", str(EXAMPLE_TRACES / "simple_add"), "--lake", str(tmp_path / "lake"), env=env)
    assert done.code == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"tracelake ingest: cannot open the Dagster home {home} ")
    assert "more than one head" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
