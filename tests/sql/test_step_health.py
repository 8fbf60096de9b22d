"""step_health on a hand-built trace with worked-out numbers, and its launch delay against HTA 0.5.0's
get_aten_op_kernels_and_delay (runtime_delay = kernel start - launch call start)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from diag_fixtures import cpu_op, kernel, launch, step, write_trace
from gpu_marts_helpers import build_lake, read_mart

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")

# step: (start µs, duration µs, gap to the first op µs, launch -> kernel start µs)
STEPS = {1: (1000, 3000, 500, 30), 2: (4000, 1000, 100, 40), 3: (5000, 1000, 100, 50), 4: (6000, 1100, 100, 60)}


def _overhead(ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "overhead", "name": "Activity Buffer Request", "pid": 0, "tid": 0, "ts": ts, "dur": dur}


@pytest.fixture(scope="module")
def health(tmp_path_factory: pytest.TempPathFactory):
    src = tmp_path_factory.mktemp("health_src")
    events = [_overhead(4800, 300), _overhead(5200, 50)]
    for n, (start, dur, gap, delay) in STEPS.items():
        op_ts = start + gap
        events += [
            step(n, start, dur),
            cpu_op("aten::mm", op_ts, 200, external_id=n),
            launch(op_ts + 50, 20, correlation=n),
            kernel("volta_sgemm_128x64_nn", op_ts + 50 + delay, 100, correlation=n),
        ]
    trace = write_trace(src / "health", 0, 1, events)
    lake_dir = tmp_path_factory.mktemp("health_lake")
    _, results = build_lake(src, lake_dir, {"step_health"})
    return trace, {r["step"]: r for r in read_mart(lake_dir, "step_health")}, results


def test_checks_pass(health):
    _, _, results = health
    assert all(c.passed for c in results["health"][0].checks)


def test_worked_numbers(health):
    _, rows, _ = health
    assert sorted(rows) == [1, 2, 3, 4]
    # Durations 3000, 1000, 1000, 1100 µs: median 1050 µs.
    assert [rows[n]["total_ns"] for n in range(1, 5)] == [3_000_000, 1_000_000, 1_000_000, 1_100_000]
    assert {rows[n]["median_ns"] for n in rows} == {1_050_000}
    assert rows[1]["vs_median_ratio"] == pytest.approx((3000 - 1050) / 3000)
    assert rows[4]["vs_median_ratio"] == pytest.approx(50 / 1100)
    assert rows[2]["vs_median_ratio"] == rows[3]["vs_median_ratio"] == 0
    assert rows[1]["vs_median"] == pytest.approx(3000 / 1050)
    # Outlier: over 1.5 x 1050 = 1575 µs (or under 700 µs): step 1 only. Warmup: the first step, over 1.5 x the
    # median of the later steps (1000 µs).
    assert [rows[n]["is_outlier"] for n in range(1, 5)] == [True, False, False, False]
    assert [rows[n]["is_warmup"] for n in range(1, 5)] == [True, False, False, False]
    assert [rows[n]["first_op_gap_ns"] for n in range(1, 5)] == [500_000, 100_000, 100_000, 100_000]
    assert [rows[n]["mean_launch_delay_ns"] for n in range(1, 5)] == [30_000, 40_000, 50_000, 60_000]
    # Buffer requests: [4800, 5100] straddles steps 2 and 3 -> 200 µs in step 2, 100 µs in step 3; [5200, 5250]
    # adds 50 µs to step 3.
    assert [rows[n]["profiler_overhead_ns"] for n in range(1, 5)] == [0, 200_000, 150_000, 0]


def test_launch_delay_matches_hta(health, tmp_path):
    from hta.trace_analysis import TraceAnalysis

    trace, rows, _ = health
    (tmp_path / "hta").mkdir()
    (tmp_path / "hta" / "rank-0.json").write_bytes(trace.read_bytes())
    logging.getLogger("hta").setLevel(logging.ERROR)
    ref = TraceAnalysis(trace_dir=str(tmp_path / "hta")).get_aten_op_kernels_and_delay(ranks=[0])[0]
    (row,) = ref.itertuples()
    assert (row.aten_op_name, row.kernel_sequence) == ("aten::mm", "volta_sgemm_128x64_nn")
    # HTA drops the last ProfilerStep: its mean is over steps 1-3.
    kept = [rows[n]["mean_launch_delay_ns"] for n in (1, 2, 3)]
    assert row.occurrence_count == 3
    assert abs(sum(kept) / len(kept) / 1000 - row.avg_runtime_delay) <= 1.0
