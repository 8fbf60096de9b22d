"""GPU activities linked to the ops that launched them by the launch's own time and thread (int_launch_ops), on a
2023 trace whose runtime calls carry their correlation id as External id (HTA's test data, MIT: simple_add, an
AlexNet benchmark on an A100), against HTA 0.5.0's call graph (a runtime call's parent is the op open around it on
its thread; a kernel's, the runtime call of its correlation)."""

from __future__ import annotations

import logging
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gpu_marts_helpers import build_lake, close, query_model, read_mart

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
SIMPLE_ADD = TRACES / "simple_add" / "benchmark_result_493459_1694039959_trace.json.gz"
MODERN = TRACES / "rocm_mi250" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def _hta_self_device_us(path: Path) -> Counter[str]:
    """Device time (µs) per launching op name, as HTA's call graph links kernels, memcpy and memset to ops."""
    from hta.common.trace import Trace
    from hta.common.trace_call_graph import CallGraph

    logging.getLogger("hta").setLevel(logging.ERROR)
    trace = Trace(trace_files={0: path.name}, trace_dir=str(path.parent))
    trace.parse_traces()
    CallGraph(trace)  # writes each event's parent into the rank's frame
    frame, names = trace.get_trace(0), trace.symbol_table.get_sym_table()
    categories = [i for i, name in enumerate(names) if name in DEVICE_CATEGORIES]
    device = frame[frame["stream"].ne(-1) & frame["index_correlation"].gt(0) & frame["cat"].isin(categories)]
    per_op: Counter[str] = Counter()
    for call, dur in zip(device["index_correlation"], device["dur"], strict=True):
        op = frame.loc[call, "parent"]
        if op >= 0:
            per_op[names[int(frame.loc[op, "name"])]] += int(dur)
    return per_op


@pytest.fixture(scope="module")
def simple_add_lake(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("launch_attr")
    (root / "src" / "simple_add").mkdir(parents=True)
    shutil.copy(SIMPLE_ADD, root / "src" / "simple_add" / SIMPLE_ADD.name)
    lake, results = build_lake(root / "src", root / "lake", {"op_stats"})
    return lake, root / "lake", next(iter(results))


def test_degenerate_external_ids_are_found(simple_add_lake) -> None:
    lake, _, run_id = simple_add_lake
    assert query_model(lake, run_id, "int_degenerate_ids", "select runtime_calls from int_degenerate_ids") == [(331,)]


def test_op_device_time_matches_hta_on_a_2023_trace(simple_add_lake) -> None:
    _, lake_dir, _ = simple_add_lake
    ours = {row["op_name"]: row["self_device_ns"] / 1000 for row in read_mart(lake_dir, "op_stats")}
    reference = _hta_self_device_us(SIMPLE_ADD)
    assert reference["aten::copy_"] > 30_000 and reference["aten::cudnn_convolution"] > 5_000
    # by External id (= correlation id) aten::to got 24.9 ms and aten::empty_strided 10.9 ms, launching nothing
    assert ours["aten::to"] == 0 and ours["aten::empty_strided"] == 0
    for name in set(ours) | set(reference):
        assert close(ours.get(name, 0.0), reference.get(name, 0)), (name, ours.get(name), reference.get(name))


def test_modern_trace_is_not_degenerate(tmp_path: Path) -> None:
    (tmp_path / "src" / "mi250").mkdir(parents=True)
    shutil.copy(MODERN, tmp_path / "src" / "mi250" / MODERN.name)
    lake, results = build_lake(tmp_path / "src", tmp_path / "lake", {"op_stats"})
    assert query_model(lake, next(iter(results)), "int_degenerate_ids", "select * from int_degenerate_ids") == []
