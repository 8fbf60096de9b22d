"""Two runs ingested at once by the multiprocess executor against a persistent instance: every trace is
its own step in its own process, both runs land whole, and a trace that fails does not keep the others out."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import dagster as dg
import pytest

from pipelines.lake.read import open_lake
from tests.support.servers import EXAMPLE_TRACES, ROOT
from tests.support.steps_job import FAILING

pytestmark = pytest.mark.slow

RUNS = {
    "alpha": {"rank-0": "simple_add/alexnet_trace.json.gz", FAILING: "simple_add/alexnet_trace.json.gz",
              "rank-1": "rocm_mi250/mi250_minitoy_train_ROCm6_2_kineto.json.gz"},
    "beta": {"rank-0": "nccl_rank0_of_2/rank-0.json.gz", "rank-1": "simple_add/alexnet_trace.json.gz"},
}
KERNELS = {("alpha", "rank-0"): 79, ("alpha", "rank-1"): 14, ("beta", "rank-0"): 2700, ("beta", "rank-1"): 79}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory):
    """Both runs' raw tables materialized by two concurrent ``execute_job`` processes; the instance and lake."""
    tmp = tmp_path_factory.mktemp("steps")
    source, lake, home = tmp / "source", tmp / "lake", tmp / "dagster_home"
    home.mkdir()
    for run_id, files in RUNS.items():
        (source / run_id).mkdir(parents=True)
        for trace_id, example in files.items():
            shutil.copy(EXAMPLE_TRACES / example, source / run_id / f"{trace_id}.json.gz")
    env = {**os.environ, "DAGSTER_HOME": str(home), "TRACELAKE_SOURCE": str(source), "TRACELAKE_LAKE": str(lake),
           "PYTHONPATH": str(ROOT)}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions("trace_runs", list(RUNS))
    procs = {
        run_id: subprocess.Popen(
            [sys.executable, "-m", "tests.support.steps_job", run_id, str(source / run_id)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for run_id in RUNS
    }
    outputs = {run_id: proc.communicate(timeout=300) for run_id, proc in procs.items()}
    for run_id, proc in procs.items():
        assert proc.returncode == 0, f"{run_id}: {outputs[run_id][1][-3000:]}"
    dagster_runs = {run_id: out.strip().splitlines()[-1] for run_id, (out, _) in outputs.items()}
    instance = dg.DagsterInstance.from_config(str(home))
    yield instance, dagster_runs, lake
    instance.dispose()


def _steps(instance: dg.DagsterInstance, dagster_run_id: str) -> dict[str, set[int]]:
    """Step key → pids of its successful step events."""
    steps: dict[str, set[int]] = {}
    for entry in instance.all_logs(dagster_run_id, of_type=dg.DagsterEventType.STEP_SUCCESS):
        steps.setdefault(entry.step_key, set()).add(entry.dagster_event.pid)
    return steps


def test_each_trace_is_its_own_step_in_its_own_process(ingested) -> None:
    instance, dagster_runs, _ = ingested
    for run_id, dagster_run_id in dagster_runs.items():
        steps = _steps(instance, dagster_run_id)
        parse = {k: pids for k, pids in steps.items() if k.startswith("raw_tables.parse_trace[")}
        expected = {f"raw_tables.parse_trace[{t.replace('-', '_')}]" for t in RUNS[run_id]}
        assert set(parse) == expected
        assert {"raw_tables.list_traces", "raw_tables.stage_raw_tables"} <= set(steps)
        pids = [pid for p in parse.values() for pid in p]
        assert len(set(pids)) == len(pids) == len(expected)  # a fresh process per trace


def test_both_runs_land_with_every_good_trace(ingested) -> None:
    _, _, lake = ingested
    con = open_lake(str(lake))
    kernels = {(r, t): n for r, t, n in con.sql("select run_id, trace_id, count(*) from kernels group by all").fetchall()}
    assert kernels == KERNELS
    traces = dict(con.sql("select run_id || '/' || trace_id, status from traces").fetchall())
    assert traces == {"alpha/rank-0": "ok", "alpha/rank-1": "ok", f"alpha/{FAILING}": "failed",
                      "beta/rank-0": "ok", "beta/rank-1": "ok"}


def test_a_failing_trace_becomes_an_error_row(ingested) -> None:
    _, _, lake = ingested
    con = open_lake(str(lake))
    issues = con.sql("select run_id, trace_id, severity, message from quality_issues where code = 'parse_failed'").fetchall()
    assert [(r, t, s) for r, t, s, _ in issues] == [("alpha", FAILING, "error")]
    assert "injected read failure" in issues[0][3]


def test_parse_steps_and_commit_share_one_version(ingested) -> None:
    _, _, lake = ingested
    for run_id in RUNS:
        versions = {p.name.split("-", 1)[0] for p in lake.glob(f"raw/*/run_id={run_id}/*.parquet")}
        assert len(versions) == 1
