"""int_steps without ProfilerStep#N: steps found from the trace (repeated top-level annotations, graph launches, or
the whole trace), named by step_rule, each covering the device work its launches queued, so that GPU utilization
reads the kernels' busy share of the window on inference traces (vLLM's, from TraceLens' test data), graph replays
and loops of forward passes profiled with torch on the CPU here."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from diag_fixtures import BASE_NS, kernel, launch, write_trace
from gpu_marts_helpers import build_lake, read_mart

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")

FIXTURES = Path(__file__).with_name("fixtures") / "no_profiler_step"
VLLM_TRACES = ("vllm_decode_full_graph", "vllm_prefilldecode_piecewise")
PASSES = 4


def _forward_loop(folder: Path) -> list[tuple[int, int]]:
    """A loop of forward passes under record_function("forward") over a DataLoader, profiled without a schedule (no
    ProfilerStep); returns each pass's (start, end) in ns from the trace's base time. The loader's
    enumerate(DataLoader)#...__next__ annotations repeat at the top of the thread too, holding more time than the
    passes: they are part of an iteration, not the iterations."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    class Samples(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 16 * PASSES

        def __getitem__(self, index: int) -> torch.Tensor:
            return torch.randn(64, 64).mean(0)

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    with profile(activities=[ProfilerActivity.CPU]) as prof, torch.no_grad():
        for batch in torch.utils.data.DataLoader(Samples(), batch_size=16):
            with record_function("forward"):
                model(batch)
    folder.mkdir(parents=True)
    path = folder / "rank-0.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    base = trace.get("baseTimeNanoseconds", 0)
    assert not [e for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    annotations = [e for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]
    passes = [e for e in annotations if e["name"] == "forward"]
    loading = [e for e in annotations if e["name"].startswith("enumerate(DataLoader)#")]
    assert len(passes) == PASSES and sum(e["dur"] for e in loading) > sum(e["dur"] for e in passes)
    # as the ingest reads them: ns = round(µs × 1000), end = start + duration
    return sorted((base + round(e["ts"] * 1000), base + round(e["ts"] * 1000) + round(e["dur"] * 1000)) for e in passes)


def _graph_replays(folder: Path) -> None:
    """Three CUDA graph replays 2.5 ms apart, no annotation: each launch (10 µs) queues two 1 ms kernels starting
    400 µs later, the last replay's running 2.39 ms past its launch's end."""
    events = []
    for i in range(3):
        at = 100 + i * 2500
        events.append(launch(at, 10, 100 + i, name="cudaGraphLaunch"))
        events.append(kernel("graph_gemm", at + 400, 1000, 100 + i))
        events.append(kernel("graph_softmax", at + 1400, 1000, 100 + i))
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 100, "tid": 100, "ts": 50, "dur": 5,
                   "args": {"External id": 1}})
    write_trace(folder, 0, 1, events)


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict:
    src = tmp_path_factory.mktemp("found_src")
    for name in VLLM_TRACES:
        (src / name).mkdir()
        shutil.copy(FIXTURES / f"{name}.json.gz", src / name / "rank-0.json.gz")
    passes = _forward_loop(src / "forward_loop")
    _graph_replays(src / "graph_replays")
    lake = tmp_path_factory.mktemp("found_lake")
    _, results = build_lake(src, lake, {"step_breakdown", "gpu_metrics"})
    failed = [(run, c.name) for run, marts in results.items() for mart in marts for c in mart.checks if not c.passed]
    steps: dict[str, list[dict]] = {}
    for row in sorted(read_mart(lake, "step_breakdown"), key=lambda r: r["start_ns"]):
        steps.setdefault(row["run_id"], []).append(row)
    gpus = {row["run_id"]: row for row in read_mart(lake, "gpu_metrics")}
    return {"steps": steps, "gpus": gpus, "passes": passes, "failed_checks": failed}


def test_checks_pass(found) -> None:
    # among them gpu_metrics' window_holds_launched_kernels: no launched kernel ends past a found step window
    assert found["failed_checks"] == []


def _kernels_ns(name: str) -> list[tuple[float, float]]:
    """The trace's kernels as (start, end) in ns, read from its JSON."""
    trace = json.loads(gzip.decompress((FIXTURES / f"{name}.json.gz").read_bytes()))
    base = trace.get("baseTimeNanoseconds", 0)
    return sorted((base + e["ts"] * 1000, base + (e["ts"] + e["dur"]) * 1000)
                  for e in trace["traceEvents"] if e.get("cat") == "kernel")


def _union(ranges: list[tuple[float, float]]) -> float:
    busy, reach = 0.0, float("-inf")
    for ts, end in ranges:
        busy += max(0.0, end - max(ts, reach))
        reach = max(reach, end)
    return busy


def test_repeated_top_level_annotations_are_the_steps(found) -> None:
    rows = found["steps"]["forward_loop"]
    assert [r["step_rule"] for r in rows] == ["annotation"] * PASSES
    assert [r["step"] for r in rows] == list(range(PASSES))
    starts = [start for start, _ in found["passes"]]
    # each pass runs from its start to the next one's (loading the next batch is the iteration's), the last to its end
    assert [r["start_ns"] for r in rows] == starts
    assert [r["end_ns"] for r in rows] == [*starts[1:], found["passes"][-1][1]]
    assert all(r["kernel_ns"] == 0 and r["total_ns"] > 0 for r in rows)


def test_graph_replays_are_the_steps_and_reach_their_device_work(found) -> None:
    rows = found["steps"]["graph_replays"]
    assert [r["step_rule"] for r in rows] == ["graph_launch"] * 3
    # a replay runs from its launch to the next one, the last until its kernels end (7500 µs), not its launch (5110)
    assert [(r["start_ns"] - BASE_NS, r["end_ns"] - BASE_NS) for r in rows] == [
        (100_000, 2_600_000), (2_600_000, 5_100_000), (5_100_000, 7_500_000)]
    assert [r["kernel_ns"] for r in rows] == [2_000_000] * 3
    gpu = found["gpus"]["graph_replays"]
    assert gpu["step_rule"] == "graph_launch"
    assert gpu["gpu_utilization_ratio"] == pytest.approx(6000 / 7400, abs=1e-9)


@pytest.mark.parametrize("name", VLLM_TRACES)
def test_inference_trace_utilization_is_the_kernels_busy_share(found, name: str) -> None:
    # One annotation holds the pass (the piecewise trace's 25 graph pieces too), so the step is the whole trace,
    # reaching to the end of the device work its launches queued: tb_plugin's host-span step read 0 % here.
    (row,) = found["steps"][name]
    assert row["step_rule"] == "whole_trace"
    kernels = _kernels_ns(name)
    gpu = found["gpus"][name]
    assert gpu["span_start_ns"] <= kernels[0][0] + 1000 and gpu["span_end_ns"] >= max(end for _, end in kernels) - 1000
    share = _union(kernels) / (gpu["span_end_ns"] - gpu["span_start_ns"])
    assert gpu["gpu_utilization_ratio"] > 0.5
    assert abs(gpu["gpu_utilization_ratio"] - share) <= 0.02
