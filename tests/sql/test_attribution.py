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
from gpu_marts_helpers import build_lake, close, read_mart

ATTRIBUTION_MARTS = {"op_stats_by_shape", "source_stats", "module_stats", "annotation_stats", "op_perf"}
_FRAME = re.compile(r"^(.+)\((\d+)\): (.*)$")


def _profile(out: Path, steps: int, **options):  # -> torch.profiler.profile (torch imports on use)
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


def _stdlib_modules() -> set[str]:
    return {name for name in sys.stdlib_module_names if name != "test"}


def _user_frame(stack: list[str]) -> tuple[str, int, str] | None:
    """The innermost entry of a torch stack that is a Python frame outside torch and the standard library."""
    stdlib = _stdlib_modules()
    for entry in stack:
        match = _FRAME.match(entry)
        if not match or match[1].startswith(("torch/", "<")) or "site-packages/torch/" in match[1]:
            continue
        if re.search(r"/lib/python3\.\d+/", match[1]) and "-packages/" not in match[1]:
            continue
        if re.sub(r"\.py$", "", match[1].split("/")[0]) in stdlib:
            continue
        return match[1], int(match[2]), match[3]
    return None


def _without_call_stacks(trace: Path, out: Path) -> None:
    """Write ``trace`` to ``out`` (gzipped) with each op's `Call stack` arg removed: python_function ranges only."""
    data = json.loads(trace.read_text(), strict=False)  # torch 2.13 writes a control character in one name
    for event in data["traceEvents"]:
        event.get("args", {}).pop("Call stack", None)
    out.parent.mkdir(parents=True)
    with gzip.open(out, "wt") as f:
        json.dump(data, f)


def _torch_source_figures(prof) -> tuple[dict, dict]:
    """torch's own source figures per frame: from its FunctionEvents (calls and totals of each frame's outermost
    ops, self times of all) and from key_averages(group_by_stack_n=100) (self times)."""

    def is_op(event) -> bool:
        return not event.is_python_function and not event.is_user_annotation

    # Python frames that run inside an op (a GC finaliser, say) are children in torch's tree, not in ours (the op
    # tree holds ops and annotations): their time stays in the op's self time here.
    python_inside = defaultdict(float)
    events = defaultdict(lambda: {"calls": 0, "total": 0.0, "self": 0.0})
    for event in prof.events():
        frame = _user_frame(event.stack) if is_op(event) else None
        if frame is None:
            continue
        python_inside[frame] += sum(c.cpu_time_total for c in event.cpu_children if c.is_python_function)
        events[frame]["self"] += event.self_cpu_time_total
        parent = event.cpu_parent
        while parent is not None and parent.is_python_function:
            parent = parent.cpu_parent
        if parent is None or not is_op(parent) or _user_frame(parent.stack) != frame:
            events[frame]["calls"] += 1
            events[frame]["total"] += event.cpu_time_total
    op_names = {e.name for e in prof.events() if is_op(e)}
    grouped = defaultdict(float)
    for group in prof.key_averages(group_by_stack_n=100):
        if group.key in op_names and (frame := _user_frame(group.stack)) is not None:
            grouped[frame] += group.self_cpu_time_total
    for frame, extra in python_inside.items():
        events[frame]["self"] += extra
        grouped[frame] += extra
    return dict(events), dict(grouped)


def _assert_calls_and_totals_match(rows: list[dict], events: dict) -> None:
    """Per line: calls and total time as torch's FunctionEvents have them."""
    ours = {(r["source_file"], r["source_line"], r["function"]): r for r in rows}
    assert set(ours) == set(events)
    for frame, ref in events.items():
        row = ours[frame]
        assert row["calls"] == ref["calls"], (frame, row, ref)
        assert close(row["total_cpu_ns"] / 1000, ref["total"]), (frame, row, ref)
        assert row["total_device_ns"] == 0


def _assert_self_times_match(rows: list[dict], events: dict, grouped: dict) -> None:
    """Per line: self time as torch's FunctionEvents and key_averages(group_by_stack_n) have it, within 1 µs however
    long the line's self time: the JSON has torch's nanosecond times, so they agree to the nanosecond (a line's share
    of AccumulateGrad, to which torch gives no frame, is often under 0.5 %)."""
    ours = {(r["source_file"], r["source_line"], r["function"]): r for r in rows}
    assert set(ours) == set(events) == set(grouped)
    for frame, ref in events.items():
        row = ours[frame]
        assert close(row["self_cpu_ns"] / 1000, ref["self"], rel_tol=0), (frame, row, ref)
        assert close(row["self_cpu_ns"] / 1000, grouped[frame], rel_tol=0), (frame, row, grouped[frame])


@pytest.fixture(scope="module")
def stack_run(tmp_path_factory: pytest.TempPathFactory):
    """One torch trace with stacks and modules, twice: as torch writes it (each op's `Call stack` arg and the
    python_function ranges), and with the Call stacks removed (python_function ranges only). Returns the lake,
    the trace file, and torch's own source figures per frame (_torch_source_figures)."""
    import torch

    root = tmp_path_factory.mktemp("attr_stacks")
    trace = root / "src" / "stacks" / "rank-0.pt.trace.json"
    prof = _profile(trace, 2, with_stack=True, with_modules=True,
                    experimental_config=torch.profiler._ExperimentalConfig(verbose=True))
    _without_call_stacks(trace, root / "src" / "python_only" / "rank-0.pt.trace.json.gz")
    events, grouped = _torch_source_figures(prof)
    build_lake(root / "src", root / "lake", ATTRIBUTION_MARTS)
    return root / "lake", trace, events, grouped


@pytest.mark.parametrize("run_id", ["stacks", "python_only"])
def test_source_stats_match_torch_stacks(stack_run, run_id: str) -> None:
    lake, _, events, _ = stack_run
    rows = [r for r in read_mart(lake, "source_stats") if r["run_id"] == run_id]
    assert {r["source_file"] for r in rows} == {"tracelake/workloads.py"}
    assert {r["function"] for r in rows} >= {"forward", "attend", "vit_training_step"}
    _assert_calls_and_totals_match(rows, events)


@pytest.mark.parametrize("run_id", ["stacks", "python_only"])
def test_source_stats_self_time_matches_torch(stack_run, run_id: str) -> None:
    lake, _, events, grouped = stack_run
    _assert_self_times_match([r for r in read_mart(lake, "source_stats") if r["run_id"] == run_id], events, grouped)


def _write_through_views(x, w):  # -> torch.Tensor
    y = x @ w
    y[:, 0] = y[:, 1] * 3
    y.view(-1)[3:9].add_(2)
    return y.relu().sum()


def _backward_through_views(x, w) -> None:
    _write_through_views(x, w).backward()


def test_source_stats_of_backward_nodes_no_forward_op_made(tmp_path: Path) -> None:
    """In-place writes through views make CopySlices nodes, which no forward op made (no fwdbwd flow): torch gives
    what runs under them the frame of the line that ran backward(), and what runs under AccumulateGrad none."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    x, w = torch.randn(64, 64), torch.randn(64, 64, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU], with_stack=True,
                 experimental_config=torch.profiler._ExperimentalConfig(verbose=True)) as prof:
        for _ in range(2):
            _backward_through_views(x, w)
    trace = tmp_path / "src" / "stacks" / "rank-0.pt.trace.json"
    trace.parent.mkdir(parents=True)
    prof.export_chrome_trace(str(trace))
    assert {"torch::autograd::CopySlices", "torch::autograd::AccumulateGrad"} <= {
        e.name for e in prof.events() if e.scope == 1  # torch's RecordScope.BACKWARD_FUNCTION
    }
    _without_call_stacks(trace, tmp_path / "src" / "python_only" / "rank-0.pt.trace.json.gz")
    events, grouped = _torch_source_figures(prof)
    assert {function for _, _, function in events} == {"_write_through_views", "_backward_through_views"}
    build_lake(tmp_path / "src", tmp_path / "lake", {"source_stats"})
    for run_id in ("stacks", "python_only"):
        rows = [r for r in read_mart(tmp_path / "lake", "source_stats") if r["run_id"] == run_id]
        _assert_calls_and_totals_match(rows, events)
        _assert_self_times_match(rows, events, grouped)


def test_stdlib_module_list_matches_python() -> None:
    import importlib.util

    def runs_as_source(name: str) -> bool:
        spec = importlib.util.find_spec(name)
        return spec is not None and bool(
            spec.submodule_search_locations or (spec.origin or "").endswith(".py") or spec.origin == "frozen"
        )

    import duckdb

    from transforms.models import discover_models

    listed = {row[0] for row in duckdb.sql(discover_models()["int_python_stdlib_modules"].sql).fetchall()}
    assert listed == {name for name in _stdlib_modules() if runs_as_source(name)}


def _tb_module_view(path: Path) -> dict[str, dict]:
    """torch-tb-profiler's Module view of one trace file, flattened to module paths ('/'-joined names)."""
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.module_op import aggegate_module_view

    profile = RunProfileData.parse(path.name, None, str(path), "/tmp")
    flat: dict[str, dict] = {}

    def walk(stats, prefix: str) -> None:
        for s in stats:
            module_path = f"{prefix}/{s.name}" if prefix else s.name
            flat[module_path] = {"calls": s.occurences, "total": s.host_duration, "self": s.self_host_duration,
                                 "device": s.device_duration}
            walk(s.children, module_path)

    walk(aggegate_module_view(profile.tid2tree, profile.events) or [], "")
    return flat


def test_module_stats_match_tb_plugin_module_view(stack_run) -> None:
    lake, _, _, _ = stack_run
    # tb_plugin's json.loads rejects the raw control character torch 2.13 writes; the python_only copy has it escaped
    reference = _tb_module_view(lake.parent / "src" / "python_only" / "rank-0.pt.trace.json.gz")
    assert {"TinyViT_0", "TinyViT_0/Conv2d_0", "TinyViT_0/Sequential_0/Linear_3"} <= set(reference)
    for run_id in ("stacks", "python_only"):
        ours = {r["module_path"]: r for r in read_mart(lake, "module_stats") if r["run_id"] == run_id}
        assert set(ours) == set(reference), run_id
        for module_path, ref in reference.items():
            row = ours[module_path]
            assert row["calls"] == ref["calls"], (module_path, row, ref)
            assert close(row["total_cpu_ns"] / 1000, ref["total"]), (module_path, row, ref)
            assert close(row["self_cpu_ns"] / 1000, ref["self"]), (module_path, row, ref)
            assert close(row["total_device_ns"] / 1000, ref["device"]), (module_path, row, ref)


@pytest.fixture(scope="module")
def annotated_gpu_lake(tmp_path_factory: pytest.TempPathFactory, shared_traces: Path):
    """The shared GPU traces that carry gpu_user_annotation ranges, ingested with the attribution marts built."""
    root = tmp_path_factory.mktemp("attr_gpu")
    for run in ("nccl_rank0_of_2", "rocm_mi250", "tb_plugin_resnet50"):
        (root / "src" / run).mkdir(parents=True)
        for path in (shared_traces / run).glob("*.json.gz"):
            (root / "src" / run / path.name).write_bytes(path.read_bytes())
    build_lake(root / "src", root / "lake", ATTRIBUTION_MARTS)
    return root


def _hta_annotation_breakdown(
    trace_file: Path, tmp: Path, *, use_gpu_annotation: bool, include_last_profiler_step: bool = False
) -> dict[str, float]:
    """HTA's user-annotation breakdown (sum in µs by name), with no grouping into "other"."""
    from hta.analyzers.breakdown_analysis import BreakdownAnalysis
    from hta.trace_analysis import TraceAnalysis

    folder = tmp / trace_file.parent.name
    if not folder.exists():
        folder.mkdir(parents=True)
        (folder / "rank-0.json.gz").write_bytes(trace_file.read_bytes())
    analysis = TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=include_last_profiler_step)
    frame = BreakdownAnalysis.get_gpu_user_annotation_breakdown(
        analysis.t, use_gpu_annotation=use_gpu_annotation, visualize=False, duration_ratio=1.0, num_kernels=10**6
    )
    return dict(zip(frame["name"], frame["sum (us)"], strict=False))


@pytest.mark.slow
@pytest.mark.parametrize("run_id", ["nccl_rank0_of_2", "rocm_mi250"])
def test_annotation_stats_match_hta(annotated_gpu_lake: Path, run_id: str, tmp_path: Path) -> None:
    trace_file = next((annotated_gpu_lake / "src" / run_id).glob("*.json.gz"))
    ours = {r["annotation"]: r for r in read_mart(annotated_gpu_lake / "lake", "annotation_stats") if r["run_id"] == run_id}
    device = _hta_annotation_breakdown(trace_file, tmp_path, use_gpu_annotation=True)
    # the host side keeps the last step (HTA's window is for the device side, whose last step may be cut short)
    host = _hta_annotation_breakdown(trace_file, tmp_path, use_gpu_annotation=False, include_last_profiler_step=True)
    assert device and host
    assert {name for name, row in ours.items() if row["calls"]} == set(host)
    # every host annotation is a call, the last step's too (nccl_rank0_of_2: 3 steps, 3 forward passes)
    events = json.loads(gzip.decompress(trace_file.read_bytes()))["traceEvents"]
    recorded = defaultdict(int)
    for event in events:
        if event.get("cat") == "user_annotation" and event.get("ph") == "X":
            recorded[event["name"]] += 1
    assert {name: row["calls"] for name, row in ours.items() if row["calls"]} == recorded
    assert {name for name, row in ours.items() if row["total_device_ns"]} == set(device)
    for name, row in ours.items():
        assert row["device_time_source"] == "gpu_user_annotation"
        assert close(row["total_cpu_ns"] / 1000, host.get(name, 0.0)), (name, row, host.get(name))
        assert close(row["total_device_ns"] / 1000, device.get(name, 0.0)), (name, row, device.get(name))
    # kernels were launched inside each annotation HTA saw on the device, except the nccl: ones (record_param_comms
    # ops launch the NCCL kernels outside those annotations' host ranges)
    assert all(ours[name]["device_kernel_count"] > 0 for name in device if not name.startswith("nccl:"))


def test_annotation_stats_on_cpu_trace_match_key_averages(shapes_run) -> None:
    lake, reference = shapes_run
    ours = {r["annotation"]: r for r in read_mart(lake, "annotation_stats")}
    assert {"forward", "backward", "optimizer_step", "Optimizer.step#SGD.step"} <= set(ours)
    for name, row in ours.items():
        (ref,) = [e for (key, _), e in reference.items() if key == name]
        assert row["calls"] == ref.count
        # HTA's whole-µs clock (start rounded up, end down) drops under 2 µs per range
        assert close(row["total_cpu_ns"] / 1000, ref.cpu_time_total, abs_tol=2 * ref.count), (name, row, ref)
        assert row["total_device_ns"] == 0 and row["device_kernel_count"] == 0
        assert row["device_time_source"] == "launched_kernels"


def test_op_perf_flops_equal_torch_count(shapes_run) -> None:
    """For every (op, shapes) torch counts FLOPs for (with_flops=True), ours are exactly torch's."""
    lake, reference = shapes_run
    ours = {(r["op_name"], json.dumps(json.loads(r["input_dims"]))): r for r in read_mart(lake, "op_perf")}
    counted = {key: ref for key, ref in reference.items() if ref.flops}
    assert {name for name, _ in counted} >= {"aten::addmm", "aten::mm", "aten::conv2d", "aten::add"}
    for key, ref in counted.items():
        assert key in ours, key
        assert ours[key]["flops"] == ref.flops, (key, ours[key]["flops"], ref.flops)
        assert ours[key]["calls"] == ref.count
    families = {r["family"] for r in ours.values()}
    assert {"GEMM", "SDPA", "CONV", "binary_elementwise", "layer_norm"} <= families
    for row in ours.values():  # a CPU trace: no device time, so no rates and no roofline
        assert row["bytes"] > 0 and row["arithmetic_intensity"] > 0
        assert row["total_device_ns"] == 0 and row["tflops_per_s"] is None and row["bound"] is None


@pytest.mark.slow
def test_op_perf_on_a_gpu_trace(annotated_gpu_lake: Path) -> None:
    """The V100 ResNet-50 trace: its GEMMs and elementwise ops get FLOP rates below the V100's peak and a roofline
    verdict; its convolutions, recorded without concrete inputs (strides, padding), get no row."""
    rows = [r for r in read_mart(annotated_gpu_lake / "lake", "op_perf") if r["run_id"] == "tb_plugin_resnet50"]
    assert {"GEMM", "binary_elementwise"} <= {r["family"] for r in rows}
    assert "CONV" not in {r["family"] for r in rows}
    assert {r["gpu_model"] for r in rows} == {"NVIDIA V100 SXM2"}
    for row in rows:
        if row["total_device_ns"] > 0:
            assert 0 < row["tflops_per_s"] <= row["peak_tflops_per_s"], row
            # bytes are a DRAM model: a tensor still in L2 can beat the DRAM peak (relu_ after batch norm here)
            assert row["tb_per_s"] > 0 and row["peak_tb_per_s"] == 0.9, row
            assert row["bound"] in ("compute", "memory")
            assert 0 < row["peak_flops_ratio"] <= 1


@pytest.mark.slow
def test_source_stats_device_time_matches_tb_plugin_on_gpu_trace(annotated_gpu_lake: Path) -> None:
    """The V100 ResNet-50 trace (2021 Call stacks): per line of user code, the host and device time of the line's
    outermost ops (ops whose parent op is not on the same line) as torch-tb-profiler's op tree has them (its
    device time: kernels of the runtime calls inside each op)."""
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.node import OperatorNode

    path = next((annotated_gpu_lake / "src" / "tb_plugin_resnet50").glob("*.json.gz"))
    profile = RunProfileData.parse(path.name, None, str(path), "/tmp")
    device: dict[tuple, float] = defaultdict(float)
    host: dict[tuple, float] = defaultdict(float)

    def frame_of(node) -> tuple | None:
        if type(node) is not OperatorNode or not node.callstack:
            return None
        return _user_frame(node.callstack.split(";"))

    def walk(node, parent_frame) -> None:
        frame = frame_of(node)
        if frame is not None and frame != parent_frame:
            device[frame] += node.device_duration
            host[frame] += node.end_time - node.start_time
        for child in node.children:
            walk(child, frame)

    for root in profile.tid2tree.values():
        walk(root, None)
    trace_id = path.name.split(".json")[0]
    ours = {
        (r["source_file"], r["source_line"], r["function"]): r
        for r in read_mart(annotated_gpu_lake / "lake", "source_stats") if r["trace_id"] == trace_id
    }
    assert set(ours) == set(device) and sum(device.values()) > 0
    for frame, ref in device.items():
        assert close(ours[frame]["total_device_ns"] / 1000, ref), (frame, ours[frame], ref)
        assert close(ours[frame]["total_cpu_ns"] / 1000, host[frame]), (frame, ours[frame], host[frame])
