"""The stragglers mart: hand-built NCCL fixtures with worked-out numbers and HTA 0.5.0's get_potential_stragglers as
an oracle, and real gloo DDP runs made with torch in which one rank is deliberately slow."""

from __future__ import annotations

import gzip
import json
import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from diag_fixtures import allreduce_args, kernel, launch, step, write_trace
from gpu_marts_helpers import build_lake, read_mart

from tracelake.workloads import GLOO_RUN_ID, profile_gloo_job

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")

NCCL_KERNEL = "ncclKernel_AllReduce_RING_LL_Sum_float"  # the name prefix HTA 0.5.0's straggler analysis looks for
# Start of each rank's all-reduce kernel within every 1000 µs step; all end at +800 µs (the collective blocks).
LATE_STARTS = {0: 200, 1: 210, 2: 500}
BALANCED_STARTS = {0: (200, 210), 1: (210, 200)}  # odd steps, even steps: the last arriver alternates
TIED_STARTS = {0: (500, 200), 1: (200, 300)}  # each arrives last at 2 of 4, rank 0 300 µs late, rank 1 100 µs
WIDE_STARTS = {**dict.fromkeys(range(7), 200), 7: 700}  # 8 ranks, rank 7 500 µs late at every step


def _nccl_run(folder: Path, starts: dict[int, object]) -> None:
    ranks = sorted(starts)
    for rank in ranks:
        events = []
        for s in range(1, 5):
            t0 = 1000 * s
            start = starts[rank] if isinstance(starts[rank], int) else starts[rank][s % 2 == 0]
            events += [
                step(s, t0, 1000),
                launch(t0 + 100, 10, correlation=s),
                kernel(NCCL_KERNEL, t0 + start, 800 - start, correlation=s, **allreduce_args(s - 1, ranks)),
            ]
        write_trace(folder, rank, len(ranks), events)


@pytest.fixture(scope="module")
def nccl_stragglers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    src = tmp_path_factory.mktemp("stragglers_src")
    _nccl_run(src / "late_rank", LATE_STARTS)
    _nccl_run(src / "balanced", BALANCED_STARTS)
    _nccl_run(src / "tied", TIED_STARTS)
    _nccl_run(src / "wide", WIDE_STARTS)
    lake_dir = tmp_path_factory.mktemp("stragglers_lake")
    _, results = build_lake(src, lake_dir, {"stragglers"})
    rows = {(r["run_id"], r["rank"]): r for r in read_mart(lake_dir, "stragglers")}
    return src, rows, results


def test_checks_pass(nccl_stragglers):
    _, _, results = nccl_stragglers
    for run_id, (mart,) in results.items():
        assert all(c.passed for c in mart.checks), (run_id, [c for c in mart.checks if not c.passed])


def test_late_rank_worked_numbers(nccl_stragglers):
    _, rows, _ = nccl_stragglers
    # Each of the 4 all-reduces: rank 2 starts last (+500 µs); rank 0 waits 300 µs, rank 1 290 µs, so rank 2 held
    # each up 300 µs (the first arrival's wait: wall time, not the ranks' waits summed), 1200 µs in all. Span: first
    # start 1200 µs to last end 4800 µs = 3600 µs; 5 % = 180 µs.
    r0, r1, r2 = (rows[("late_rank", r)] for r in range(3))
    assert [r["collectives"] for r in (r0, r1, r2)] == [4, 4, 4]
    assert [r["arrived_last_count"] for r in (r0, r1, r2)] == [0, 0, 4]
    assert [r["arrived_first_count"] for r in (r0, r1, r2)] == [4, 0, 0]
    assert r2["arrived_last_ratio"] == 1.0 and r0["arrived_last_ratio"] == 0.0
    assert [r["caused_wait_ns"] for r in (r0, r1, r2)] == [0, 0, 1_200_000]
    assert [r["total_wait_ns"] for r in (r0, r1, r2)] == [1_200_000, 1_160_000, 0]
    assert r0["mean_wait_ns"] == 300_000 and r2["collective_span_ns"] == 3_600_000
    assert [r["is_straggler"] for r in (r0, r1, r2)] == [False, False, True]
    assert r2["caused_wait_ratio"] == 1.0


def test_balanced_run_has_no_straggler(nccl_stragglers):
    _, rows, _ = nccl_stragglers
    # The last arriver alternates, 10 µs late each time: each rank caused 2 x 10 µs = half of the wait, but 20 µs is
    # far below 5 % of the 3600 µs span, so neither is a straggler.
    r0, r1 = rows[("balanced", 0)], rows[("balanced", 1)]
    assert (r0["arrived_last_count"], r1["arrived_last_count"]) == (2, 2)
    assert (r0["caused_wait_ns"], r1["caused_wait_ns"]) == (20_000, 20_000)
    assert r0["caused_wait_ratio"] == r1["caused_wait_ratio"] == 0.5
    assert not r0["is_straggler"] and not r1["is_straggler"]


def test_a_tie_in_arrivals_is_judged_by_the_wait_caused(nccl_stragglers):
    _, rows, _ = nccl_stragglers
    # Rank 0 held its two collectives up 300 µs each, rank 1 its two 100 µs: each arrived last at 2 of 4
    # collectives, but rank 0 caused 3/4 of the wait, well over 5 % of the 3600 µs span: rank 0 is the straggler
    # (a 2-rank gloo run's arrival counts can tie while one rank causes nearly all the wait).
    r0, r1 = rows[("tied", 0)], rows[("tied", 1)]
    assert (r0["arrived_last_count"], r1["arrived_last_count"]) == (2, 2)
    assert (r0["caused_wait_ns"], r1["caused_wait_ns"]) == (600_000, 200_000)
    assert r0["caused_wait_ratio"] == 0.75
    assert r0["is_straggler"] and not r1["is_straggler"]


def test_caused_wait_fits_the_window(nccl_stragglers):
    _, rows, results = nccl_stragglers
    # Rank 7 held each of 4 collectives up 500 µs: 2000 µs of the 3600 µs span, where the 7 waiting ranks' waits
    # summed (14000 µs) would not fit in it.
    wide = [rows[("wide", rank)] for rank in range(8)]
    assert wide[7]["caused_wait_ns"] == 2_000_000 and wide[7]["is_straggler"]
    assert wide[7]["total_wait_ns"] == 0 and wide[0]["total_wait_ns"] == 2_000_000
    assert all(r["caused_wait_ns"] <= r["collective_span_ns"] for r in rows.values())
    (mart,) = results["wide"]
    assert [c.passed for c in mart.checks if c.name == "caused_wait_within_span"] == [True]


def test_verdict_agrees_with_hta(nccl_stragglers, tmp_path):
    """HTA's top candidate (num_candidates=1: the rank whose long NCCL kernel starts latest in most steps)."""
    from hta.trace_analysis import TraceAnalysis

    src, rows, _ = nccl_stragglers
    logging.getLogger("hta").setLevel(logging.ERROR)
    analysis = TraceAnalysis(trace_dir=str(src / "late_rank"))
    hta_stragglers = analysis.get_potential_stragglers(num_candidates=1)
    ours = [rank for (run_id, rank), r in rows.items() if run_id == "late_rank" and r["is_straggler"]]
    assert ours == hta_stragglers == [2]


def _gloo_reference(run_dir: Path) -> dict[int, dict[str, int]]:
    """Arrivals recomputed from the trace JSON: the k-th gloo:<op> host range of every rank is one collective."""
    ranges: dict[tuple[str, int], dict[int, float]] = {}
    for path in sorted(run_dir.glob("rank-*.json.gz")):
        trace = json.loads(gzip.decompress(path.read_bytes()))
        rank, base = trace["distributedInfo"]["rank"], trace["baseTimeNanoseconds"]
        seen: dict[str, int] = {}
        events = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("gloo:")]
        for e in sorted(events, key=lambda e: (e["ts"], e["ts"] + e["dur"])):
            k = seen[e["name"]] = seen.get(e["name"], 0) + 1
            ranges.setdefault((e["name"], k), {})[rank] = base + round(e["ts"] * 1000)
    ref: dict[int, dict[str, int]] = {}
    held_up: dict[int, list[tuple[int, int]]] = {}
    for starts in ranges.values():
        if len(starts) < 2:
            continue
        latest = max(starts.values())
        for rank, t in starts.items():
            row = ref.setdefault(rank, {"collectives": 0, "arrived_last": 0, "caused_wait": 0})
            row["collectives"] += 1
            if t == latest:
                row["arrived_last"] += 1
                held_up.setdefault(rank, []).append((min(starts.values()), latest))
    for rank, intervals in held_up.items():  # the wall time the rank held collectives up: the intervals' union
        reach = None
        for lo, hi in sorted(intervals):
            ref[rank]["caused_wait"] += max(0, hi - max(lo, reach if reach is not None else lo))
            reach = hi if reach is None else max(reach, hi)
    return ref


def _check_gloo_run(run_dir: Path, lake_dir: Path, slow_rank: int) -> None:
    _, results = build_lake(run_dir.parent, lake_dir, {"stragglers"})
    assert all(c.passed for mart in results[run_dir.name] for c in mart.checks)
    rows = {r["rank"]: r for r in read_mart(lake_dir, "stragglers")}
    ref = _gloo_reference(run_dir)
    assert set(rows) == set(ref)
    for rank, r in rows.items():
        assert r["backends"] == "gloo"
        assert r["collectives"] == ref[rank]["collectives"]
        assert r["arrived_last_count"] == ref[rank]["arrived_last"]
        assert abs(r["caused_wait_ns"] - ref[rank]["caused_wait"]) <= 1
    assert [rank for rank, r in rows.items() if r["is_straggler"]] == [slow_rank]


def test_gloo_slow_rank_is_named(gloo_traces_dir, tmp_path):
    """The demo's 2-rank gloo DDP run: rank 1 computes about 20 ms more per step before the collectives."""
    _check_gloo_run(gloo_traces_dir / GLOO_RUN_ID, tmp_path / "lake", slow_rank=1)


@pytest.mark.slow
def test_gloo_three_ranks_slowest_is_named(tmp_path):
    """3 ranks, rank r computing r units more: rank 2 makes both others wait, rank 1 only rank 0."""
    profile_gloo_job(str(tmp_path / "src"), run_id="gloo3", world_size=3, steps=6, uneven=True)
    _check_gloo_run(tmp_path / "src" / "gloo3", tmp_path / "lake", slow_rank=2)
