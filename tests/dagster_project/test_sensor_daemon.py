"""The sensor alone, run by a real Dagster daemon, gets traces dropped into S3 into the lake.

The daemon uses the shipped ``deploy/dagster.yaml`` (queued runs, per-partition limit), the
source is a moto S3 server on loopback, and the sensor is turned on with ``dagster sensor start``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from pipelines.lake.read import open_lake
from tests.support.servers import EXAMPLE_TRACES, ROOT, process_group, wait_for

pytestmark = pytest.mark.slow

ALEXNET = (EXAMPLE_TRACES / "simple_add" / "alexnet_trace.json.gz").read_bytes()
ROCM = (EXAMPLE_TRACES / "rocm_mi250" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz").read_bytes()


def _runs_by_partition(instance: dg.DagsterInstance) -> dict[str, list[dg.DagsterRunStatus]]:
    runs: dict[str, list[dg.DagsterRunStatus]] = {}
    for run in instance.get_runs():
        runs.setdefault(run.tags.get("dagster/partition", "?"), []).append(run.status)
    return runs


def _finished(instance: dg.DagsterInstance, count: int) -> bool:
    runs = instance.get_runs()
    failed = [r for r in runs if r.status == dg.DagsterRunStatus.FAILURE]
    if failed:
        run = failed[0]
        pytest.fail(f"run {run.run_id} of {run.tags.get('dagster/partition')} failed: {_step_errors(instance, run.run_id)}")
    return sum(r.status == dg.DagsterRunStatus.SUCCESS for r in runs) >= count


def _step_errors(instance: dg.DagsterInstance, run_id: str) -> str:
    records = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    return "\n".join(record.dagster_event.step_failure_data.error.to_string() for record in records)


def _sensor_ticks(instance: dg.DagsterInstance) -> int:
    state = next(s for s in instance.all_instigator_state() if s.name == "trace_runs_sensor")
    return len(instance.get_ticks(state.instigator_origin_id, state.selector_id))


def test_sensor_ingests_new_runs_late_ranks_and_rewrites_once(bucket, tmp_path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
    lake = tmp_path / "lake"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "TRACELAKE_SOURCE": bucket.url("fleet"),
        "TRACELAKE_LAKE": str(lake),
        "TRACELAKE_SENSOR_INTERVAL_S": "2",
        "TRACELAKE_FULL_PASS_EVERY": "2",  # S3 ticks alternate full and StartAfter listings
        "PYTHONPATH": str(ROOT),
    }
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    bucket.put("fleet/job-a/rank-0.json.gz", ALEXNET)
    bucket.put("fleet/job-b/rank-0.json.gz", ROCM)

    code = ["-m", "dagster_project.definitions"]
    subprocess.run([sys.executable, "-m", "dagster", "sensor", "start", "trace_runs_sensor", *code],
                   env=env, cwd=ROOT, check=True, capture_output=True)
    daemon = [str(Path(sys.executable).with_name("dagster-daemon")), "run", *code]
    with process_group(daemon, env=env, log=tmp_path / "daemon.log"), dg.DagsterInstance.get() as instance:
        wait_for(lambda: _finished(instance, 2), timeout=120, what="the first two runs")

        bucket.put("fleet/job-a/rank-1.json.gz", ROCM)  # a late rank
        bucket.put("fleet/job-b/rank-0.json.gz", ALEXNET)  # the same key, rewritten
        wait_for(lambda: _finished(instance, 4), timeout=120, what="the late rank's and the rewrite's runs")

        # More ticks, a full pass among them, see the same files and launch nothing.
        ticks = _sensor_ticks(instance)
        wait_for(lambda: _sensor_ticks(instance) >= ticks + 3, timeout=60, what="three more sensor ticks")
        runs = _runs_by_partition(instance)

    assert runs == {"job-a": [dg.DagsterRunStatus.SUCCESS] * 2, "job-b": [dg.DagsterRunStatus.SUCCESS] * 2}
    con = open_lake(str(lake))
    traces = con.sql("select run_id, trace_id, size_bytes from traces order by all").fetchall()
    assert traces == [("job-a", "rank-0", len(ALEXNET)), ("job-a", "rank-1", len(ROCM)), ("job-b", "rank-0", len(ALEXNET))]
    kernels = dict(con.sql("select run_id || '/' || trace_id, count(*) from kernels group by all").fetchall())
    assert kernels["job-a/rank-0"] == kernels["job-b/rank-0"] > 0  # the same trace, once each
    assert con.sql("select count(*) from runs").fetchall() == [(2,)]
