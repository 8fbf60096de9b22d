"""The local Dagster home: the dagster.yaml ``tracelake`` writes into a new home, what ``tracelake ingest``
records for it and the records' sensor posts (as the assets' own runs would show them), and homes opened by several
processes at once."""

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

import dagster_project.home
import dagster_project.record
from dagster_project.home import _WRITTEN_BY_0_2, QUIET, dagster_home, lake_key
from dagster_project.outbox import records_folder
from dagster_project.record import post_records
from dagster_project.resources import LakeResource
from pipelines.lake.lake import Lake
from pipelines.tables import RAW_TABLES
from tests.cli.conftest import tracelake as run_tracelake
from tests.support.servers import EXAMPLE_TRACES
from transforms.models import discover_models


def test_a_new_home_gets_dagsters_defaults_a_users_own_stays(tmp_path: Path, monkeypatch) -> None:
    default, new, users, old = tmp_path / "default", tmp_path / "new", tmp_path / "users", tmp_path / "old"
    for home in (users, old):
        home.mkdir()
    (users / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")  # a user's own
    (old / "dagster.yaml").write_text(_WRITTEN_BY_0_2)  # tracelake 0.2 named an event log storage since removed
    monkeypatch.setattr(dagster_project.home, "DEFAULT_ROOT", default)
    lake = Lake(str(tmp_path / "lake"))

    monkeypatch.delenv("DAGSTER_HOME")
    assert dagster_home(lake) == default / lake_key(lake)  # a home per lake
    for home in (new, users, old):
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        assert dagster_home(lake) == home

    assert (default / lake_key(lake) / "dagster.yaml").read_text() == QUIET
    assert (new / "dagster.yaml").read_text() == ""  # telemetry is the user's to turn off
    assert (old / "dagster.yaml").read_text() == ""
    assert (users / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"
    assert sorted(p.name for p in new.iterdir()) == ["dagster.yaml"]  # written whole, nothing left beside it
    monkeypatch.setenv("DAGSTER_HOME", str(old))
    with dg.DagsterInstance.get() as instance:  # opens: no module named in it is missing
        assert instance.get_runs() == []


def _recorded(instance: dg.DagsterInstance) -> dict:
    """What the UI shows of the home's asset history: each asset's materializations with their metadata, each
    check's latest evaluation, the partitions."""
    checks = [dg.AssetCheckKey(dg.AssetKey(["marts", mart]), name)
              for mart in ("kernel_stats", "step_breakdown") for name in ("grain_unique", "value_ranges")]
    checks.append(dg.AssetCheckKey(dg.AssetKey(["marts", "run_metrics"]), "no_regression"))  # the gate's verdict
    return {
        "materializations": {
            key.to_user_string(): [(r.asset_materialization.partition, r.asset_materialization.metadata)
                                   for r in instance.fetch_materializations(key, limit=10).records]
            for key in instance.get_asset_keys()
        },
        "checks": {key: instance.event_log_storage.get_latest_asset_check_execution_by_key([key]).get(key)
                   for key in checks},
        "partitions": instance.get_dynamic_partitions("trace_runs"),
    }


@pytest.mark.slow
def test_an_ingest_records_each_asset_and_check_of_its_runs(tmp_path: Path, monkeypatch) -> None:
    home, lake = tmp_path / "home", tmp_path / "lake"
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    for _ in range(2):  # a run ingested again records again
        done = run_tracelake("ingest", str(EXAMPLE_TRACES / "simple_add"), "--lake", str(lake), env=env)
        assert done.code == 0, done.stdout + done.stderr
        assert f"recorded 1 run for the Dagster instance at {home}" in done.stdout
    unrecorded = run_tracelake("ingest", str(EXAMPLE_TRACES / "rocm_mi250"), "--lake", str(lake), "--no-record", env=env)
    assert unrecorded.code == 0 and "recorded" not in unrecorded.stdout, unrecorded.stdout

    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        sensor = dagster_project.record.tracelake_records_sensor  # what the UI's daemon runs
        result = sensor(dg.build_sensor_context(instance=instance, resources={"lake": LakeResource(url=str(lake))}))
        assert "posted 2 ingested runs" in str(result.skip_message)
        assert list(post_records(instance, Lake(str(lake)))) == []  # posted once
        recorded = _recorded(instance)
        assert instance.get_runs() == []  # recorded without running Dagster
    assert list(records_folder(home, Lake(str(lake))).iterdir()) == []
    marts = {name for name, model in discover_models().items() if model.layer == "marts"}
    assert set(recorded["materializations"]) == ({f"raw/{t}" for t in RAW_TABLES} | {f"marts/{m}" for m in marts}
                                                 | {"report"})
    assert recorded["partitions"] == ["simple_add"]
    for key, materializations in recorded["materializations"].items():
        assert [partition for partition, _ in materializations] == ["simple_add"] * 2, key
        assert materializations[0][1], key  # its metadata
    kernels = recorded["materializations"]["raw/kernels"][0][1]
    assert kernels["dagster/row_count"].value > 0 and kernels["traces"].value == 1
    stats = recorded["materializations"]["marts/kernel_stats"][0][1]
    assert stats["dagster/row_count"].value > 0 and "kernel_name" in stats["preview"].value
    assert str(lake / "reports" / "simple_add.html") in str(recorded["materializations"]["report"][0][1]["report"])
    for key, execution in recorded["checks"].items():
        assert execution is not None and execution.status.value == "SUCCEEDED", key


def test_a_record_that_cannot_be_read_is_left_aside(tmp_path: Path, monkeypatch) -> None:
    lake = Lake(str(tmp_path / "lake"))
    folder = records_folder(tmp_path / "home", lake)
    folder.mkdir(parents=True)
    (folder / "broken.json").write_text("{not json")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    with dg.DagsterInstance.get() as instance:
        assert list(post_records(instance, lake)) == []
    assert [p.name for p in folder.iterdir()] == [".unreadable-broken.json"]


OPEN_AT = """
import sys, time
from dagster_project.home import dagster_home
from dagster_project.record import open_instance
from pipelines.lake.lake import Lake
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))  # every process opens the new home at the same moment
open_instance(dagster_home(Lake("lake"))).get_runs()
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
    assert done.code == 0, done.stdout + done.stderr  # the lake does not depend on the home
    done = run_tracelake("ui", "--lake", str(tmp_path / "lake"), "--port", "1", env=env)  # posting opens it
    assert done.code == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"tracelake ui: cannot open the Dagster home {home} ")
    assert "more than one head" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
