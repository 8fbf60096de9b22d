"""The DataLoader as recent PyTorch records it, a user_annotation ``enumerate(DataLoader)#_MultiProcessingDataLoaderIter
.__next__``, counts as DataLoader time in step_breakdown (tb_plugin's roles), as it does when it is a cpu_op: a real
profile on CPU of a loader with two workers whose items take a while."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gpu_marts_helpers import build_lake, read_mart

LOADER_NEXT = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


class SlowItems:
    """Items that take 20 ms each to load: the loader, not the model, holds the step."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int):  # -> torch.Tensor
        import torch

        time.sleep(0.02)
        return torch.full((16,), float(index))


@pytest.fixture(scope="module")
def loader_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    root = tmp_path_factory.mktemp("loader")
    model = torch.nn.Linear(16, 4)
    loader = torch.utils.data.DataLoader(SlowItems(), batch_size=4, num_workers=2)
    out = root / "src" / "loader" / "rank-0.pt.trace.json"
    out.parent.mkdir(parents=True)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
                 on_trace_ready=lambda done: done.export_chrome_trace(str(out))) as prof:
        for step, batch in enumerate(loader):
            model(batch).sum().backward()
            prof.step()
            if step == 5:
                break
    build_lake(root / "src", root / "lake", {"step_breakdown"})
    return root


def test_loader_is_a_user_annotation(loader_lake: Path) -> None:
    events = json.loads((loader_lake / "src" / "loader" / "rank-0.pt.trace.json").read_text())["traceEvents"]
    assert {e.get("cat") for e in events if e.get("name") == LOADER_NEXT} == {"user_annotation"}


def test_loader_time_is_dataloader_time(loader_lake: Path) -> None:
    rows = read_mart(loader_lake / "lake", "step_breakdown")
    assert rows
    for row in rows:
        assert row["dataloader_ns"] > 0.5 * row["total_ns"], row
