"""Fixtures of the kernel/op/memory mart tests (prefixed ``gpu_marts_`` so they cannot clash with other areas)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest


def _profile_small_model(out_dir: Path) -> tuple[Path, dict[str, dict[str, float]]]:
    """Profile a small MLP on the CPU with torch.profiler, export its Chrome trace and capture key_averages()."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64)
    trace_path = out_dir / "mlp.pt.trace.json"
    captured: dict[str, dict[str, float]] = {}

    def on_ready(prof: profile) -> None:
        prof.export_chrome_trace(str(trace_path))
        for e in prof.key_averages():
            captured[e.key] = {
                "count": e.count,
                "cpu_time_total": e.cpu_time_total,
                "self_cpu_time_total": e.self_cpu_time_total,
            }

    def side_thread() -> None:
        with record_function("side_thread_work"):
            torch.randn(16, 16).matmul(torch.randn(16, 16))

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=3),
        on_trace_ready=on_ready,
        profile_memory=True,
        record_shapes=True,
    ) as prof:
        for _ in range(4):
            with record_function("train_step"):
                opt.zero_grad()
                loss = model(x).square().mean()
                loss.backward()
                opt.step()
            t = threading.Thread(target=side_thread)
            t.start()
            t.join()
            prof.step()
    return trace_path, captured


@pytest.fixture(scope="session")
def gpu_marts_torch_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, float]]]:
    """A real CPU trace made by torch.profiler in this session, with its key_averages() by op name."""
    out = tmp_path_factory.mktemp("gpu_marts_torch") / "mlp_run"
    out.mkdir()
    return _profile_small_model(out)
