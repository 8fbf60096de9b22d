"""kernel_launches for launch calls HTA 0.5.0 does not know: a CUDA graph launch (one correlation, several kernels)
and a HIP kernel launch, on a hand-built trace with worked-out numbers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from diag_fixtures import BASE_NS, kernel, launch, write_trace
from gpu_marts_helpers import build_lake, read_mart


def test_graph_and_hip_launches(tmp_path):
    events = [
        launch(100, 10, correlation=1, name="cudaGraphLaunch"),
        kernel("graph_kernel_a", 120, 5, correlation=1),
        kernel("graph_kernel_b", 126, 4, correlation=1),
        kernel("graph_kernel_c", 131, 9, correlation=1, stream=8),
        launch(200, 8, correlation=2, name="hipLaunchKernel"),
        kernel("hip_kernel", 230, 20, correlation=2),
    ]
    write_trace(tmp_path / "src" / "launch_kinds", 0, 1, events)
    _, results = build_lake(tmp_path / "src", tmp_path / "lake", {"kernel_launches"})
    assert all(c.passed for c in results["launch_kinds"][0].checks)
    rows = {r["correlation"]: r for r in read_mart(tmp_path / "lake", "kernel_launches")}
    graph, hip = rows[1], rows[2]
    # Graph: call [100, 110] µs; kernels from 120 to 140 µs: first kernel's name and stream, span 20 µs, delay 10 µs.
    assert (graph["runtime_name"], graph["kernel_name"], graph["stream"]) == ("cudaGraphLaunch", "graph_kernel_a", 7)
    assert (graph["kernel_count"], graph["gpu_dur_ns"], graph["launch_delay_ns"]) == (3, 20_000, 10_000)
    assert (graph["cpu_ts_ns"], graph["gpu_ts_ns"], graph["cpu_dur_ns"]) == (BASE_NS + 100_000, BASE_NS + 120_000, 10_000)
    # HIP: call [200, 208] µs, kernel at 230 µs for 20 µs: delay 22 µs.
    assert (hip["runtime_name"], hip["kernel_count"], hip["gpu_dur_ns"], hip["launch_delay_ns"]) == (
        "hipLaunchKernel", 1, 20_000, 22_000)
