"""Differential tests of the attribution marts (op_stats_by_shape, source_stats, module_stats, annotation_stats,
op_perf) against their anchors: torch's own key_averages and FunctionEvents on traces torch makes here,
torch-tb-profiler 0.4.3's module view, and HTA 0.5.0's user-annotation breakdown on the shared GPU traces
(/work/shared/traces: HTA test data, MIT; tb_plugin samples, BSD).

Agreement: within 1 µs or 0.5 %, whichever is larger; FLOPs exactly.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gpu_marts_helpers import build_lake, close, query_model, read_mart  # noqa: E402

ATTRIBUTION_MARTS = {"op_stats_by_shape", "source_stats", "module_stats", "annotation_stats", "op_perf"}
_FRAME = re.compile(r"^(.+)\((\d+)\): (.*)$")


def _profile(out: Path, steps: int, **options) -> "torch.profiler.profile":
    """Train TinyViT for ``steps`` steps under the profiler with ``options`` and export ``out``."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from tracelake.workloads import TinyViT, vit_batch, vit_training_step

    torch.manual_seed(0)
    model = TinyViT()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    images, labels = vit_batch()
    with profile(activities=[ProfilerActivity.CPU], **options) as prof:
        for _ in range(steps):
            vit_training_step(model, optimizer, images, labels)
    out.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(out))
    return prof


@pytest.fixture(scope="module")
def shapes_run(tmp_path_factory: pytest.TempPathFactory):
    """A trace with shapes and FLOPs (no stacks: python events would join torch's op tree), its lake, and torch's
    key_averages(group_by_input_shape=True) by (name, shapes)."""
    root = tmp_path_factory.mktemp("attr_shapes")
    prof = _profile(root / "src" / "shapes" / "rank-0.pt.trace.json", 2, record_shapes=True, with_flops=True)
    reference = {
        (e.key, json.dumps(e.input_shapes)): e for e in prof.key_averages(group_by_input_shape=True)
    }
    build_lake(root / "src", root / "lake", ATTRIBUTION_MARTS)
    return root / "lake", reference


def test_op_stats_by_shape_match_key_averages(shapes_run) -> None:
    lake, reference = shapes_run
    ours = {(r["op_name"], json.dumps(json.loads(r["input_dims"]))): r for r in read_mart(lake, "op_stats_by_shape")}
    assert ("aten::addmm", json.dumps([[192], [512, 64], [64, 192], [], []])) in ours
    assert set(ours) == set(reference)
    for key, ref in reference.items():
        row = ours[key]
        assert row["calls"] == ref.count, key
        assert close(row["total_cpu_ns"] / 1000, ref.cpu_time_total), (key, row["total_cpu_ns"], ref.cpu_time_total)
        assert close(row["self_cpu_ns"] / 1000, ref.self_cpu_time_total), (key, row, ref.self_cpu_time_total)
        assert row["total_device_ns"] == 0 and row["self_device_ns"] == 0
