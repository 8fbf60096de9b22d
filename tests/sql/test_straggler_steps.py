"""straggler_steps and stragglers' per-step columns: hand-built NCCL runs with numbers worked out by hand (HTA 0.5.0's
per-iteration straggler counts beside them), and real gloo DDP runs made with torch on the CPU in which the last rank
computes more in backward only, or skips a collective that the others time out in."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from diag_fixtures import kernel, launch, step, write_trace
from gpu_marts_helpers import build_lake, read_mart

from tracelake.workloads import BACKWARD_STRAGGLER_RUN_ID, SKIPPED_COLLECTIVE_RUN_ID, profile_straggler_job

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")

NCCL_KERNEL = "ncclKernel_AllReduce_RING_LL_Sum_float"  # the name prefix HTA 0.5.0's straggler analysis looks for
GEMM = "volta_sgemm_128x64_nn"
STEPS = range(1, 5)
# compute_straggler: per step, each rank's GEMM runs [50, 50 + C) µs into the 1000 µs step, then the all-reduce from
# there to +800 µs (the collective ends together). Rank 2 computes 200 µs more in steps 1, 3 and 4; step 2 ties ranks
# 1 and 2.
COMPUTE_US = {s: {0: 300, 1: 300, 2: 500} for s in (1, 3, 4)} | {2: {0: 300, 1: 400, 2: 400}}


def _allreduce(seq: int, group: str, ranks: list[int]) -> dict:
    return {"Collective name": "allreduce", "In msg nelems": 262144, "Out msg nelems": 262144,
            "Group size": len(ranks), "dtype": "Float", "Process Group Name": group,
            "Process Group Ranks": str(ranks), "Seq": seq}


def _launched(events: list, name: str, ts: int, dur: int, corr: int, stream: int = 7, **args) -> None:
    events += [launch(ts - 40, 5, correlation=corr), kernel(name, ts, dur, correlation=corr, stream=stream, **args)]


def _compute_straggler(folder: Path) -> None:
    for rank in range(3):
        events: list = []
        for s in STEPS:
            t0, compute = 1000 * s, COMPUTE_US[s][rank]
            events.append(step(s, t0, 1000))
            _launched(events, GEMM, t0 + 50, compute, corr=10 * s)
            _launched(events, NCCL_KERNEL, t0 + 50 + compute, 750 - compute, corr=10 * s + 1, stream=20,
                      **_allreduce(s - 1, "0", [0, 1, 2]))
        write_trace(folder, rank, 3, events)


def _jitter(folder: Path) -> None:
    """2 ranks, 4 steps: the all-reduce starts at +300 µs on one rank and +310 µs on the other, alternately."""
    for rank in range(2):
        events: list = []
        for s in STEPS:
            t0, late = 1000 * s, (s + rank) % 2 == 0
            events.append(step(s, t0, 1000))
            _launched(events, GEMM, t0 + 50, 250 + 10 * late, corr=10 * s)
            _launched(events, NCCL_KERNEL, t0 + 300 + 10 * late, 500 - 10 * late, corr=10 * s + 1, stream=20,
                      **_allreduce(s - 1, "0", [0, 1]))
        write_trace(folder, rank, 2, events)


def _other_group(folder: Path) -> None:
    """Group "1" = [0, 1], group "2" = [1, 2], one step [1000, 2000) µs. Rank 0 computes [1050, 1450) and all-reduces
    over "1" [1450, 1500); rank 1 computes [1050, 1150), waits in "1" [1150, 1500), then all-reduces over "2"
    [1510, 1700); rank 2 computes [1050, 1150) and waits in "2" [1150, 1700)."""
    plan = {
        0: [(GEMM, 1050, 400, {}), (NCCL_KERNEL, 1450, 50, _allreduce(0, "1", [0, 1]))],
        1: [(GEMM, 1050, 100, {}), (NCCL_KERNEL, 1150, 350, _allreduce(0, "1", [0, 1])),
            (NCCL_KERNEL, 1510, 190, _allreduce(0, "2", [1, 2]))],
        2: [(GEMM, 1050, 100, {}), (NCCL_KERNEL, 1150, 550, _allreduce(0, "2", [1, 2]))],
    }
    for rank, kernels in plan.items():
        events: list = [step(1, 1000, 1000)]
        for corr, (name, ts, dur, args) in enumerate(kernels, start=1):
            _launched(events, name, ts, dur, corr, stream=7 if name == GEMM else 20 + corr, **args)
        write_trace(folder, rank, 3, events)


def _skipped_seq(folder: Path) -> None:
    """2 ranks, steps 1-3, one all-reduce a step with Seq 0, 1, 2; rank 1 skips Seq 1 (step 2). Each rank starts
    it at +300 µs, rank 1 at +500 µs, all end at +800 µs."""
    for rank in range(2):
        events: list = []
        for s in (1, 2, 3):
            t0 = 1000 * s
            events.append(step(s, t0, 1000))
            if rank == 1 and s == 2:
                continue
            start = 500 if rank == 1 else 300
            _launched(events, NCCL_KERNEL, t0 + start, 800 - start, corr=s, stream=20, **_allreduce(s - 1, "0", [0, 1]))
        write_trace(folder, rank, 2, events)


@pytest.fixture(scope="module")
def nccl_steps(tmp_path_factory: pytest.TempPathFactory):
    src = tmp_path_factory.mktemp("straggler_steps_src")
    _compute_straggler(src / "compute_straggler")
    _other_group(src / "other_group")
    _jitter(src / "jitter")
    _skipped_seq(src / "skipped_seq")
    lake_dir = tmp_path_factory.mktemp("straggler_steps_lake")
    _, results = build_lake(src, lake_dir, {"stragglers", "straggler_steps", "collectives"})
    steps = {(r["run_id"], r["step"], r["rank"]): r for r in read_mart(lake_dir, "straggler_steps")}
    runs = {(r["run_id"], r["rank"]): r for r in read_mart(lake_dir, "stragglers")}
    collectives = read_mart(lake_dir, "collectives")
    return src, results, steps, runs, collectives


def test_compute_culprit_per_step(nccl_steps):
    _, _, steps, _, _ = nccl_steps
    for s in (1, 3, 4):
        r0, r1, r2 = (steps[("compute_straggler", s, r)] for r in range(3))
        # Starts +350, +350, +550 µs: rank 2 is 200 µs after the median; ranks 0 and 1 wait 200 µs each, at once:
        # 200 µs of wall time owed to rank 2 (20 % of the 1000 µs step, over the 5 % bar).
        assert [r["late_ns"] for r in (r0, r1, r2)] == [0, 0, 200_000]
        assert [r["caused_wait_ns"] for r in (r0, r1, r2)] == [0, 0, 200_000]
        # GEMM time from the step's start to the all-reduce: 300, 300, 500 µs; median 300, so rank 2's 200 µs above
        # it are 40 % of its compute and explain more than half its lateness: the cause is compute.
        assert [r["compute_ns"] for r in (r0, r1, r2)] == [300_000, 300_000, 500_000]
        assert [r["compute_vs_median_ratio"] for r in (r0, r1, r2)] == [0, 0, pytest.approx(0.4)]
        assert [r["is_culprit"] for r in (r0, r1, r2)] == [False, False, True]
        assert [r["cause"] for r in (r0, r1, r2)] == [None, None, "compute"]
    # Step 2: ranks 1 and 2 both start at +450 µs: a tie is not a verdict; each held rank 0 up for its 100 µs.
    tie = [steps[("compute_straggler", 2, r)] for r in range(3)]
    assert [r["arrived_last_count"] for r in tie] == [0, 1, 1]
    assert [r["caused_wait_ns"] for r in tie] == [0, 100_000, 100_000]
    assert not any(r["is_culprit"] for r in tie) and {r["cause"] for r in tie} == {None}


def test_recurrence_per_run(nccl_steps):
    _, _, _, runs, _ = nccl_steps
    r0, r1, r2 = (runs[("compute_straggler", r)] for r in range(3))
    assert [r["steps"] for r in (r0, r1, r2)] == [4, 4, 4]
    assert [r["culprit_steps"] for r in (r0, r1, r2)] == [0, 0, 3]
    assert r2["recurrence_ratio"] == 0.75 and r0["recurrence_ratio"] == 0
    assert (r2["cause"], r2["is_recurring"], r0["cause"], r0["is_recurring"]) == ("compute", True, None, False)
    assert (r2["mean_culprit_late_ns"], r2["mean_culprit_extra_compute_ns"]) == (200_000, 200_000)
    assert r2["is_straggler"]


def test_waiting_on_another_group(nccl_steps):
    _, _, steps, _, _ = nccl_steps
    r0, r1, r2 = (steps[("other_group", 1, r)] for r in range(3))
    # Group 1: rank 0 last (+450 vs +150 µs): rank 1 waits 300 µs for it. Group 2: rank 1 last (+510 vs +150): rank 2
    # waits 360 µs. Rank 1 caused 360 of the 660 µs: the culprit, though it computed no more than the median rank
    # (100 µs); it had waited 300 µs in group 1, where it was never last, which explains its 180 µs of lateness.
    assert [r["caused_wait_ns"] for r in (r0, r1, r2)] == [300_000, 360_000, 0]
    assert [r["late_ns"] for r in (r0, r1, r2)] == [150_000, 180_000, 0]
    assert [r["compute_ns"] for r in (r0, r1, r2)] == [400_000, 100_000, 100_000]
    assert (r1["other_group_wait_ns"], r1["is_culprit"], r1["cause"]) == (300_000, True, "waiting_on_other_group")
    assert not r0["is_culprit"] and r0["cause"] is None


def test_skipped_collective_is_a_finding_and_seq_keeps_the_rest_matched(nccl_steps):
    _, results, steps, runs, collectives = nccl_steps
    rows = {(r["rank"], r["seq"]): r for r in collectives if r["run_id"] == "skipped_seq"}
    assert sorted(rows) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 2)]
    assert {r["match_rule"] for r in rows.values()} == {"seq"}
    # Seq 2 is step 3's all-reduce on both ranks, not rank 1's second one against rank 0's second.
    assert rows[(0, 2)]["wait_ns"] == 200_000 and rows[(0, 1)]["matched_ranks"] == 1
    # Step 2: rank 1 missed Seq 1; rank 0 ran it alone, so it has no collective of the step to compare.
    assert ("skipped_seq", 2, 0) not in steps
    assert (steps[("skipped_seq", 2, 1)]["missed_collectives"], steps[("skipped_seq", 2, 1)]["collectives"]) == (1, 0)
    assert runs[("skipped_seq", 1)]["missed_collectives"] == 1
    (check,) = [c for m in results["skipped_seq"] for c in m.checks if c.name == "every_rank_ran_its_collectives"]
    assert not check.passed and check.failures == 1


def test_culprit_counts_against_hta(nccl_steps):
    """HTA 0.5.0 counts, per rank, the iterations in which it is among the num_candidates ranks whose last long
    communication kernel starts latest (_get_top_k_stragglers_with_metric). Ours are culprit_steps. They differ
    where the rules differ: a tie flags every tied rank (HTA's threshold is the k-th value, >=) where we flag none;
    HTA leaves the last iteration out (the profiler may cut it short) where we keep every step int_steps keeps; and
    HTA flags someone in every iteration, however small the lateness, where a culprit here caused 5 % of the step
    or more."""
    src, _, _, runs, _ = nccl_steps
    top, counts = _hta_counts(src / "compute_straggler")
    ours = {rank: runs[("compute_straggler", rank)]["culprit_steps"] for rank in range(3)}
    assert top == [2] == [rank for rank in ours if runs[("compute_straggler", rank)]["is_straggler"]]
    # Steps 1 and 3 agree (rank 2); step 2's tie of ranks 1 and 2 is an iteration each for HTA and no verdict here;
    # step 4, the last, is rank 2's here and left out by HTA.
    assert ours == {0: 0, 1: 0, 2: 3}
    assert counts == {0: 0, 1: 1, 2: 3}
    # jitter: 10 µs late by turns, 1 % of the step: HTA flags the later rank of each iteration it keeps; no step has
    # a culprit here.
    top, counts = _hta_counts(src / "jitter")
    assert counts == {0: 1, 1: 2}
    assert [runs[("jitter", rank)]["culprit_steps"] for rank in (0, 1)] == [0, 0]


def _hta_counts(run_dir: Path) -> tuple[list[int], dict[int, int]]:
    """HTA 0.5.0's verdict (num_candidates=1) and its per-rank count of iterations in which each rank was flagged."""
    from hta.analyzers.straggler import find_stragglers_with_late_start_comm_kernels
    from hta.trace_analysis import TraceAnalysis

    logging.getLogger("hta").setLevel(logging.ERROR)
    counts: dict[int, int] = {}

    def capture(df, symbol_table, num_candidates, visualize):
        series = find_stragglers_with_late_start_comm_kernels(df, symbol_table, num_candidates, visualize)
        counts.update({int(rank): int(n) for rank, n in series.to_dict().items()})
        return series

    top = TraceAnalysis(trace_dir=str(run_dir)).get_potential_stragglers(
        num_candidates=1, straggler_identification_impl=capture)
    return top, counts


def test_real_nccl_trace_against_hta(tmp_path):
    """The shared 2-rank NCCL job's rank 0 (a real GPU trace, 3 profiled steps of 7 all-reduces each) as both ranks,
    rank 1's steps run 1.3x slower (tests/support/warped_traces.py): rank 1 starts every all-reduce last. HTA names
    it too, in 2 iterations to our 3 steps: it leaves the last iteration out."""
    from tests.support.warped_traces import write_run

    run_dir = tmp_path / "src" / "warped"
    write_run(run_dir, ((1.0, 1.0, 1.0), (1.3, 1.3, 1.3)), hours_later=0)
    build_lake(tmp_path / "src", tmp_path / "lake", {"stragglers", "straggler_steps"})
    steps = read_mart(tmp_path / "lake", "straggler_steps")
    assert sorted((r["step"], r["rank"]) for r in steps if r["is_culprit"]) == [(4, 1), (5, 1), (6, 1)]
    assert {r["collectives"] for r in steps} == {7}
    runs = {r["rank"]: r for r in read_mart(tmp_path / "lake", "stragglers")}
    assert (runs[1]["culprit_steps"], runs[1]["steps"], runs[1]["is_straggler"]) == (3, 3, True)
    # The warp makes rank 1's GPU compute 1.3x as long: 12 % of its compute is above rank 0's (the median of two).
    assert all(r["compute_vs_median_ratio"] > 0.1 for r in steps if r["rank"] == 1)
    top, counts = _hta_counts(run_dir)
    assert top == [1] and counts == {0: 0, 1: 2}


@pytest.fixture(scope="module")
def gloo_straggler_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("gloo_straggler_src")
    profile_straggler_job(str(src))
    profile_straggler_job(str(src), run_id=SKIPPED_COLLECTIVE_RUN_ID, backward_units=0, skip_step=3)
    lake_dir = tmp_path_factory.mktemp("gloo_straggler_lake")
    build_lake(src, lake_dir, {"stragglers", "straggler_steps"})
    return lake_dir


def test_backward_straggler_named_from_compute(gloo_straggler_lake):
    """Rank 1 does extra matmuls in backward only; DDP's gradient all-reduce makes rank 0 wait for them, so both
    ranks' steps last as long and only their compute tells them apart."""
    steps = pd.DataFrame(read_mart(gloo_straggler_lake, "straggler_steps"))
    steps = steps[steps.run_id == BACKWARD_STRAGGLER_RUN_ID]
    assert sorted(steps.step.unique()) == [2, 3, 4]
    culprits = steps[steps.is_culprit]
    assert list(culprits["rank"]) == [1, 1, 1] and set(culprits.cause) == {"compute"}
    slow, fast = steps[steps["rank"] == 1], steps[steps["rank"] == 0]
    assert (slow.compute_ns.to_numpy() > fast.compute_ns.to_numpy()).all()
    (run,) = [r for r in read_mart(gloo_straggler_lake, "stragglers")
              if r["run_id"] == BACKWARD_STRAGGLER_RUN_ID and r["rank"] == 1]
    assert (run["steps"], run["culprit_steps"], run["recurrence_ratio"], run["cause"]) == (3, 3, 1.0, "compute")


def test_skipped_collective_reported(gloo_straggler_lake):
    """Rank 0's all-reduce over the side group at step 3 has no partner: rank 1 skipped it. Matched by name and order
    alone, it would have been paired with rank 1's next DDP all-reduce and shifted every later one."""
    steps = {(r["step"], r["rank"]): r for r in read_mart(gloo_straggler_lake, "straggler_steps")
             if r["run_id"] == SKIPPED_COLLECTIVE_RUN_ID}
    assert {key: r["missed_collectives"] for key, r in steps.items()} == {
        (2, 0): 0, (2, 1): 0, (3, 0): 0, (3, 1): 1, (4, 0): 0, (4, 1): 0}
    # Every step's DDP all-reduce is still matched on both ranks.
    assert {r["collectives"] for r in steps.values()} == {1}
    # Rank 0 sat in the side all-reduce until it timed out, so it came late to step 4's: rank 1 waited for it there.
    assert (steps[(4, 0)]["is_culprit"], steps[(4, 0)]["cause"]) == (True, "waiting_on_other_group")
    assert steps[(4, 0)]["other_group_wait_ns"] >= steps[(4, 0)]["late_ns"]
    runs = {r["rank"]: r for r in read_mart(gloo_straggler_lake, "stragglers") if r["run_id"] == SKIPPED_COLLECTIVE_RUN_ID}
    assert (runs[0]["collectives"], runs[1]["collectives"], runs[1]["missed_collectives"]) == (3, 3, 1)


def test_check_gates_on_a_persistent_straggler(nccl_steps, tmp_path, capsys):
    """`tracelake check --metric straggler_recurrence_ratio` fails a run with a rank that is the straggler and the
    culprit of half its steps or more, baseline or not, and passes one whose only culprit step is a single one."""
    import orjson

    from pipelines.lake.lake import Lake
    from pipelines.sources import discover_runs
    from tracelake.cli import main
    from transforms.composition.ingest import IngestSettings, ingest_run

    src = nccl_steps[0]
    lake = Lake(str(tmp_path / "lake"))
    for run in discover_runs(str(src)):
        if run.run_id in ("compute_straggler", "other_group"):
            ingest_run(run, lake, settings=IngestSettings(report=False))
    capsys.readouterr()

    def check(run_id: str) -> tuple[int, dict]:
        code = main(["check", run_id, "--lake", str(tmp_path / "lake"), "--format", "json",
                     "--metric", "straggler_recurrence_ratio"])
        return code, orjson.loads(capsys.readouterr().out)

    code, report = check("compute_straggler")
    (row,) = report["metrics"]
    assert (code, report["passed"], row["value"], row["is_regression"]) == (1, False, 0.75, True)
    assert row["finding"] == "rank 2 is the culprit at 3 of 4 steps (compute)"
    code, report = check("other_group")
    assert (code, report["passed"], report["metrics"][0]["value"]) == (0, True, 1.0)
