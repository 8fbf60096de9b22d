"""Regressions across runs: run_metrics, run_regressions, straggler_history and the gate (``tracelake check``, the
Dagster ``no_regression`` check), on a job of four 2-rank runs made from the shared NCCL trace by stretching its steps
(tests/support/warped_traces.py), so that every expected number follows from the template's step durations:

    train.r1  rank 0 steps x F, rank 1 x 1.1 F            F = (0.8, 1.0, 1.2): step-to-step noise of ~19 %
    train.r2  rank 0 x 1.1 F, rank 1 x F                  the same job pace, the other rank behind
    train.r3  rank 0 x G, rank 1 x 1.1 G                  G = (0.84, 1.08, 1.26): 8 % slower, inside the noise
    train.r4  rank 0 x F, rank 1 x 1.65 F                 rank 1 made 1.5x slower: 39 % slower than r3

Rank 1 runs on host node-b (named in its file name as torch.profiler.tensorboard_trace_handler names files).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import dagster as dg
import duckdb
import orjson
import pytest

from dagster_project.assets.marts import REGRESSION_CHECK, marts
from dagster_project.assets.raw import raw_tables
from dagster_project.resources import IngestSettingsResource, LakeResource, TraceSourceResource
from pipelines.lake.fleet_views import changed_views, fleet_view_sql, read_current_fleet_views, store_fleet_views
from pipelines.lake.lake import ALIAS, Lake
from pipelines.lake.read import open_lake
from pipelines.sources import discover_runs
from tests.support.warped_traces import step_ranges, template, write_run
from tracelake.cli import main
from transforms.composition.ingest import IngestSettings, ingest_run
from transforms.report.pages import render_fleet_view

pytestmark = pytest.mark.slow

F = (0.8, 1.0, 1.2)
G = (0.84, 1.08, 1.26)
RUNS = {  # run -> each rank's step factors
    "r1": (F, tuple(1.1 * f for f in F)),
    "r2": (tuple(1.1 * f for f in F), F),
    "r3": (G, tuple(1.1 * g for g in G)),
    "r4": (F, tuple(1.65 * f for f in F)),
}
HOSTS = ("node-a", "node-b")


def _file_names(run: int) -> list[str]:
    return [f"{host}_{4000 + rank}.{1716400000000 + run}.pt.trace.json.gz" for rank, host in enumerate(HOSTS)]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the traces' folder, the lake) of job ``train``: every run ingested in order, an hour apart."""
    root = tmp_path_factory.mktemp("regressions")
    for n, (name, ranks) in enumerate(RUNS.items()):
        write_run(root / "traces" / "train" / name, ranks, hours_later=n, file_names=_file_names(n))
    lake = Lake(str(root / "lake"))
    for run in discover_runs(str(root / "traces")):
        ingest_run(run, lake, settings=IngestSettings(report=False))
    return root / "traces", root / "lake"


def _expected_step(run: str) -> tuple[float, float]:
    """(median, MAD / median) of the job's step time in ``run``: per step the slowest rank's host time, which is
    the template's step time times that rank's factor."""
    durations_ns = [(end - start) * 1000 for start, end in step_ranges(template())]
    steps = [max(factors[k] for factors in RUNS[run]) * d for k, d in enumerate(durations_ns)]
    median = statistics.median(steps)
    return median, statistics.median(abs(s - median) for s in steps) / median


def _check(lake: Path, run: str, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = main(["check", run, "--lake", str(lake), "--format", "json", *args])
    return code, orjson.loads(capsys.readouterr().out)


def _metric(report: dict, metric: str) -> dict:
    return next(row for row in report["metrics"] if row["metric"] == metric)


def test_run_metrics_hold_the_median_step_of_the_slowest_rank_and_its_spread(job):
    _, lake = job
    con = open_lake(str(lake))
    rows = {(run, metric): (job_, value, spread, steps) for run, metric, job_, value, spread, steps in con.execute(
        "select run_id, metric, job, value, spread, steps from run_metrics").fetchall()}
    for name in RUNS:
        median, spread = _expected_step(name)
        job_, value, got_spread, steps = rows[(f"train.{name}", "step_ns")]
        assert job_ == "train" and steps == 3
        assert value == pytest.approx(median, rel=1e-6) and got_spread == pytest.approx(spread, rel=1e-4)
    metrics = {metric for run, metric in rows if run == "train.r1"}
    assert metrics == {"step_ns", "exposed_communication_ns", "step_gpu_utilization_ratio", "computation_kernel_ns",
                       "communication_kernel_ns", "memory_kernel_ns"}  # the trace has no [memory] events
    # Stretching a step stretches its kernels alike: utilization stays the template's in every run.
    utilization = [value for (run, metric), (_, value, _, _) in rows.items() if metric == "step_gpu_utilization_ratio"]
    assert max(utilization) == pytest.approx(min(utilization), rel=1e-5)


def test_the_gate_fails_on_the_run_slowed_on_one_rank(job, capsys):
    _, lake = job
    code, report = _check(lake, "train.r4", capsys=capsys)
    assert code == 1 and not report["passed"] and report["baseline_run_id"] == "train.r3"
    step = _metric(report, "step_ns")
    (r4, r4_spread), (r3, r3_spread) = _expected_step("r4"), _expected_step("r3")
    assert step["change_ratio"] == pytest.approx(r4 / r3 - 1, rel=1e-4)  # +38.9 %
    assert step["noise_ratio"] == pytest.approx((r4_spread**2 + r3_spread**2) ** 0.5, rel=1e-4)  # 27.2 %
    assert step["change_ratio"] > step["noise_ratio"] > 0.05 and step["is_regression"]
    assert {row["kind"] for row in report["behind"]} == {"kernel", "op", "collective"}
    assert all(row["delta_per_step_ns"] > 0 for row in report["behind"])

    assert main(["check", "train.r4", "--lake", str(lake)]) == 1
    out = capsys.readouterr().out
    assert "train.r4 against train.r3 (the job's previous run)" in out
    assert "What got slower from train.r3 to train.r4" in out and "allreduce" in out
    assert "FAILED: train.r4 regressed against train.r3 on step_ns (+38.9 %, noise ±27.2 %)" in out


def test_the_gate_passes_a_change_inside_the_noise(job, capsys):
    _, lake = job
    code, report = _check(lake, "train.r3", capsys=capsys)
    assert code == 0 and report["passed"] and report["baseline_run_id"] == "train.r2"
    step = _metric(report, "step_ns")
    assert step["change_ratio"] == pytest.approx(_expected_step("r3")[0] / _expected_step("r2")[0] - 1, rel=1e-4)
    assert 0.05 < step["change_ratio"] < step["noise_ratio"]  # beyond the threshold, inside the noise
    assert not any(row["is_regression"] for row in report["metrics"])
    # The same run against a pinned baseline, with a threshold above the slowed run's change: nothing fails.
    assert _check(lake, "train.r4", "--baseline", "train.r1", "--max-regression", "60%", capsys=capsys)[0] == 0
    code, report = _check(lake, "train.r4", "--baseline", "train.r1", "--metric", "step_ns", capsys=capsys)
    assert code == 1 and [row["metric"] for row in report["metrics"]] == ["step_ns"]
    assert report["baseline_run_id"] == "train.r1"


def test_the_gate_says_when_a_run_or_its_baseline_is_not_in_the_lake(job, capsys):
    _, lake = job
    assert main(["check", "train.r9", "--lake", str(lake)]) == 2
    assert "run 'train.r9' is not in the lake" in capsys.readouterr().err
    assert main(["check", "train.r4", "--baseline", "other.r1", "--lake", str(lake)]) == 2
    assert "baseline 'other.r1' is not in the lake" in capsys.readouterr().err
    assert main(["check", "train.r4", "--metric", "mfu_ratio", "--lake", str(lake)]) == 2
    assert "has no metric 'mfu_ratio'" in capsys.readouterr().err
    code, report = _check(lake, "train.r1", capsys=capsys)  # its job's first run: nothing to compare with
    assert code == 0 and report["baseline_run_id"] is None


def test_regressions_view_is_the_verdict_of_the_gate(job, capsys):
    _, lake = job
    con = open_lake(str(lake))
    verdicts = dict(con.execute("select run_id, bool_or(is_regression) from run_regressions group by run_id").fetchall())
    assert verdicts == {"train.r1": False, "train.r2": False, "train.r3": False, "train.r4": True}
    for run, regressed in verdicts.items():
        assert main(["check", run, "--lake", str(lake)]) == int(regressed)
    capsys.readouterr()
    baselines = dict(con.execute("select distinct run_id, baseline_run_id from run_regressions").fetchall())
    assert baselines == {"train.r1": None, "train.r2": "train.r1", "train.r3": "train.r2", "train.r4": "train.r3"}


def test_straggler_history_names_the_rank_slow_in_most_runs(job):
    _, lake = job
    con = open_lake(str(lake))
    per_run = con.execute("select run_id, rank from stragglers where is_straggler order by run_id").fetchall()
    assert per_run == [("train.r1", 1), ("train.r2", 0), ("train.r3", 1), ("train.r4", 1)]  # as the runs were built
    rows = {row[0]: row[1:] for row in con.execute(
        "select rank, runs, straggler_runs, caused_wait_ns, host, is_repeat_straggler, recommendation "
        "from straggler_history where job = 'train'").fetchall()}
    caused = dict(con.execute("select rank, sum(caused_wait_ns) from stragglers group by rank").fetchall())
    assert rows[1][:5] == (4, 3, caused[1], "node-b", True)
    assert rows[0][:5] == (4, 1, caused[0], "node-a", False) and rows[0][5] is None
    assert rows[1][5].startswith("rank 1 (host node-b) was the straggler in 3 of the job's last 4 runs")
    page = render_fleet_view(con)  # the fleet view says so too, for the repeat straggler only
    section = page[page.index('id="stragglers"'):page.index('id="job-0"')]
    assert "node-b" in section and "3 of 4 runs" in section and "node-a" not in section


def test_the_views_live_in_the_catalog_for_any_client(job):
    _, lake = job
    with open_lake(str(lake)) as con:
        regressed = con.execute("select run_id, metric from run_regressions where is_regression").fetchall()
    # A DuckDB of one's own, the lake attached under another name as the README says, no tracelake code: the views
    # read as tables.
    with duckdb.connect() as con:
        con.execute(f"attach 'ducklake:sqlite:{lake / 'catalog.sqlite'}' as fleet "
                    f"(read_only, data_path '{lake}/', override_data_path true)")
        assert con.execute("select count(*) from fleet.marts.run_regressions").fetchall() == [(4 * 6,)]
        assert con.execute("select run_id, metric from fleet.marts.run_regressions where is_regression"
                           ).fetchall() == regressed
        assert con.execute("select count(*) from fleet.marts.straggler_history").fetchall() == [(2,)]
    assert ("train.r4", "step_ns") in regressed


def test_a_writer_stores_a_changed_view_and_a_reader_reads_the_current_sql(job):
    _, lake = job
    views = fleet_view_sql()
    edited = views | {"run_regressions": views["run_regressions"].replace("0.05)", "0.5)")}

    def thresholds() -> list[tuple]:  # read whole, so the reader's transaction ends (SQLite: no writer waits)
        with open_lake(str(lake)) as reader:
            read_current_fleet_views(reader, ALIAS, edited)
            return reader.execute("select distinct max_regression_ratio, count(*) filter (where is_regression) "
                                  "from run_regressions group by all").fetchall()

    with Lake(str(lake)).connect() as writer:
        assert changed_views(writer, ALIAS, views) == {}  # stored by the ingests' commits: nothing to do
        assert changed_views(writer, ALIAS, edited) == {"run_regressions": edited["run_regressions"]}
    assert thresholds() == [(0.5, 0)]  # the catalog still holds the 5 % view: the reader reads the file's instead
    with Lake(str(lake)).connect() as writer:
        assert store_fleet_views(writer, ALIAS, edited) == ["run_regressions"]
        assert changed_views(writer, ALIAS, edited) == {}
    with open_lake(str(lake)) as reader:
        assert reader.execute("select distinct max_regression_ratio from run_regressions").fetchall() == [(0.5,)]
    with Lake(str(lake)).connect() as writer:  # the attach stores the files' views again
        assert changed_views(writer, ALIAS, views) == {}


def test_the_dagster_check_fails_on_the_regressed_run(job):
    traces, lake = job
    resources = {"source": TraceSourceResource(url=str(traces)), "lake": LakeResource(url=str(lake)),
                 "ingest_settings": IngestSettingsResource()}
    outcomes = {}
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("trace_runs", ["train.r3", "train.r4"])
        for run in ("train.r3", "train.r4"):  # ingested again through the assets: the same runs, new versions
            result = dg.materialize([raw_tables, marts], partition_key=run, instance=instance, resources=resources)
            (evaluation,) = [e for e in result.get_asset_check_evaluations()
                             if e.asset_check_key == REGRESSION_CHECK]
            outcomes[run] = (evaluation.passed, evaluation.description)
    assert outcomes["train.r3"] == (True, "passed: no metric of train.r3 regressed against train.r2")
    assert not outcomes["train.r4"][0]
    assert outcomes["train.r4"][1].startswith("FAILED: train.r4 regressed against train.r3 on step_ns (+38.9 %")


def _gemm_steps_trace(folder: Path, step_us: list[int]) -> None:
    """Steps of the given lengths on an H100, each one bf16 aten::mm of two 4096 x 4096 matrices launching its kernel
    (the pattern of tests/sql/test_step_mfu.py's one-step trace)."""
    events, start = [], 1000
    for n, dur in enumerate(step_us, 1):
        external, correlation = 10 * n, 10 * n + 1
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1, "ts": start,
             "dur": dur, "args": {"External id": external - 1}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": start + 100, "dur": 50,
             "args": {"External id": external, "Input Dims": [[4096, 4096], [4096, 4096]],
                      "Input type": ["c10::BFloat16", "c10::BFloat16"], "Sequence number": n}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": start + 110,
             "dur": 10, "args": {"External id": external, "correlation": correlation}},
            {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm", "pid": 0, "tid": 7, "ts": start + 200,
             "dur": dur - 300, "args": {"External id": external, "correlation": correlation, "device": 0, "stream": 7}},
        ]
        start += dur
    trace = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
             "traceEvents": events, "baseTimeNanoseconds": 1_700_000_000_000_000_000}
    folder.mkdir(parents=True)
    (folder / "rank-0.json").write_text(json.dumps(trace))


def test_run_metrics_hold_the_median_mfu_where_the_gpu_peak_is_known(tmp_path):
    _gemm_steps_trace(tmp_path / "traces" / "gemm" / "run1", [1000, 1100, 1200])
    lake = Lake(str(tmp_path / "lake"))
    (run,) = discover_runs(str(tmp_path / "traces"))
    ingest_run(run, lake, settings=IngestSettings(report=False), select={"run_metrics"})
    with open_lake(str(lake.url)) as con:
        (value, spread, steps, higher_is_worse), = con.execute(
            "select value, spread, steps, higher_is_worse from run_metrics where metric = 'mfu_ratio'").fetchall()
    # Step k does 2 x 4096^3 FLOPs in its k-th length; H100 SXM's dense bf16 peak is 989.4 TFLOP/s.
    mfu = [2 * 4096**3 / (us * 1000) / 1000 / 989.4 for us in (1000, 1100, 1200)]
    median = statistics.median(mfu)
    assert value == pytest.approx(median, rel=1e-6) and steps == 3 and not higher_is_worse
    assert spread == pytest.approx(statistics.median(abs(m - median) for m in mfu) / median, rel=1e-6)
