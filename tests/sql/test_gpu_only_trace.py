"""A GPU-only trace (issue 36): runtime calls and kernels, no CPU op and no ProfilerStep, as TraceLens' MI210 test
trace (AMD-AGI/TraceLens tests/traces/mi210/gpu_only_trace/gpu_only_trace.json.gz, MIT) has them:
hipExtModuleLaunchKernel calls on the host, kernels on stream 0 without External id. It had no step row and a null
GPU utilization; as tb_plugin does without ProfilerStep, it gets one step 0, spanning here the trace's runtime calls
and device activity (tb_plugin, with no host op to span, keeps an empty sentinel step). HTA needs no step: its
temporal breakdown of the same file is the oracle for the GPU side.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from diag_fixtures import BASE_NS, launch, write_trace
from gpu_marts_helpers import build_lake, read_mart

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning", "ignore::RuntimeWarning")

# (launch µs, kernel start µs, kernel length µs)
LAUNCHES = [(0, 5, 10), (10, 16, 10), (20, 40, 10)]


def _kernel(ts_us: float, dur_us: float, correlation: int) -> dict:
    return {"ph": "X", "cat": "kernel", "name": "batched_transpose_256x4_half", "pid": 1, "tid": 0, "ts": ts_us,
            "dur": dur_us, "args": {"device": 0, "stream": 0, "correlation": correlation, "kind": "Dispatch Kernel"}}


@pytest.fixture(scope="module")
def gpu_only(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[dict]]]:
    root = tmp_path_factory.mktemp("gpu_only")
    events = []
    for correlation, (launch_us, kernel_us, length_us) in enumerate(LAUNCHES, start=1):
        events += [launch(launch_us, 2, correlation, "hipExtModuleLaunchKernel"),
                   _kernel(kernel_us, length_us, correlation)]
    write_trace(root / "src" / "gpu_only", 0, 1, events)
    marts = {"step_breakdown", "gpu_metrics", "temporal_breakdown"}
    build_lake(root / "src", root / "lake", marts)
    return root / "src" / "gpu_only", {mart: read_mart(root / "lake", mart) for mart in marts}


def test_one_step_spans_the_trace(gpu_only) -> None:
    """Step 0 = [first launch 0, last kernel end 50] µs: 30 µs of kernels, 20 µs of nothing else."""
    _, rows = gpu_only
    (step,) = rows["step_breakdown"]
    assert (step["step"], step["start_ns"] - BASE_NS, step["total_ns"]) == (0, 0, 50_000)
    assert (step["kernel_ns"], step["other_ns"]) == (30_000, 20_000)


def test_gpu_utilization_over_the_step(gpu_only) -> None:
    _, rows = gpu_only
    (gpu,) = rows["gpu_metrics"]
    assert gpu["gpu_utilization_ratio"] == pytest.approx(30 / 50)


def test_temporal_breakdown_as_hta(gpu_only) -> None:
    from hta.trace_analysis import TraceAnalysis

    folder, rows = gpu_only
    logging.getLogger("hta").setLevel(logging.ERROR)
    ref = TraceAnalysis(trace_dir=str(folder)).get_temporal_breakdown(visualize=False).iloc[0]
    (ours,) = rows["temporal_breakdown"]
    assert (ours["idle_ns"], ours["compute_ns"], ours["kernel_ns"]) == (
        ref["idle_time(us)"] * 1000, ref["compute_time(us)"] * 1000, ref["kernel_time(us)"] * 1000)
