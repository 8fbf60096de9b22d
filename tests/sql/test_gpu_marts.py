"""Differential tests of kernel_stats, op_stats and the memory marts against the reference tools.

Shared traces: /work/shared/traces (HTA test data, MIT; tb_plugin samples, BSD). The CPU trace is made with
torch.profiler in this session (conftest.gpu_marts_torch_trace).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gpu_marts_helpers import (
    build_lake,
    close,
    query_model,
    read_mart,
    tb_kernel_stat,
    tb_memory,
)

from tests.conftest import SHARED_TRACES as TRACES

GPU_MARTS = {"kernel_stats", "op_stats", "memory_timeline", "memory_by_op", "memory_peaks"}
KERNEL_TRACES = ["simple_add", "tb_plugin_resnet50", "nccl_rank0_of_2", "rank0_of_16", "trace_diff_pair", "rocm_mi250"]


def _trace_files(folder: str) -> list[Path]:
    return sorted((TRACES / folder).rglob("*.json*"))


def _trace_id(path: Path) -> str:
    return path.name.split(".json")[0]


def _run_id(path: Path) -> str:
    return ".".join(path.parent.relative_to(TRACES).parts[1:]) or path.parent.name


@pytest.fixture(scope="module")
def gpu_marts_shared_lake(tmp_path_factory: pytest.TempPathFactory):
    """One lake with every shared GPU trace folder ingested and the marts of this area built."""
    lake_dir = tmp_path_factory.mktemp("gpu_marts_lake")
    results = {}
    for folder in KERNEL_TRACES:
        _, res = build_lake(TRACES / folder, lake_dir, GPU_MARTS)
        results.update(res)
    return lake_dir, results


def test_checks_pass_on_every_shared_trace(gpu_marts_shared_lake):
    _, results = gpu_marts_shared_lake
    assert results
    for run_id, marts in results.items():
        assert {m.name for m in marts} == GPU_MARTS
        for mart in marts:
            failed = [(c.name, c.failures, c.sample) for c in mart.checks if not c.passed]
            assert not failed, (run_id, mart.name, failed)


@pytest.mark.parametrize("folder", KERNEL_TRACES)
def test_kernel_stats_match_tb_plugin_kernel_parser(gpu_marts_shared_lake, folder):
    lake_dir, _ = gpu_marts_shared_lake
    rows = read_mart(lake_dir, "kernel_stats")
    for path in _trace_files(folder):
        ref = tb_kernel_stat(path)
        ours = {
            r["kernel_name"]: r for r in rows if r["trace_id"] == _trace_id(path) and r["run_id"] == _run_id(path)
        }
        assert set(ours) == set(ref.index), path
        for name, row in ref.iterrows():
            o = ours[name]
            assert o["calls"] == row["count"], name
            # Durations in µs: within 1 µs or 0.5 %.
            for ours_col, ref_col in [("total_ns", "sum"), ("mean_ns", "mean"), ("min_ns", "min"), ("max_ns", "max")]:
                assert close(o[ours_col] / 1000, float(row[ref_col])), (name, ours_col, o[ours_col], row[ref_col])
            assert math.isclose(o["mean_blocks_per_sm"], float(row["blocks_per_sm"]), rel_tol=0.005, abs_tol=1e-6)
            assert math.isclose(
                o["mean_est_achieved_occupancy_ratio"] * 100, float(row["occupancy"]), rel_tol=0.005, abs_tol=1e-6
            ), name
            # tb_plugin's list is NVIDIA's: on the MI250, Tensile GEMMs with a matrix instruction run on MFMA
            mfma = folder == "rocm_mi250" and name.startswith("Cijk_") and "_MI16x16x1_" in name
            assert o["uses_tensor_cores"] == (bool(row["tc_used"]) or mfma), name


def test_kernel_types_match_hta(gpu_marts_shared_lake):
    from hta.utils.utils import get_kernel_type

    lake_dir, _ = gpu_marts_shared_lake
    rows = read_mart(lake_dir, "kernel_stats")
    assert rows
    for r in rows:
        assert r["kernel_type"] == get_kernel_type(r["kernel_name"]), r["kernel_name"]


def test_int_kernels_classified_matches_hta_on_edge_names(tmp_path):
    """Hand-made trace: one kernel per edge of HTA 0.5.0's regexes (re.match anchored at the start)."""
    import gzip
    import json

    from hta.utils.utils import get_kernel_type

    names = [
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ncclKernel_AllGather", "nccl_no_kernel_word",
        "Memcpy HtoD (Pageable -> Device)", "Memset (Device)", "dmaCopy", "hipMemcpyWithStream",
        "void fooMemcpyKernel<float>", "xMemset", "cudaStreamSync_like", "hipLaunchKernel_thing",
        "volta_sgemm_128x64_nn", "Stream Wait Event",
    ]
    events = [
        {"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": 7, "ts": 1000.0 + 10 * i, "dur": 5.0,
         "args": {"device": 0, "stream": 7, "correlation": i + 1, "External id": i + 1}}
        for i, n in enumerate(names)
    ]
    run = tmp_path / "src" / "edge"
    run.mkdir(parents=True)
    with gzip.open(run / "rank-0.json.gz", "wt") as f:
        json.dump({"schemaVersion": 1, "traceEvents": events}, f)
    lake, _ = build_lake(tmp_path / "src", tmp_path / "lake", {"kernel_stats"})
    got = dict(query_model(lake, "edge", "int_kernels_classified", "select name, kernel_type from int_kernels_classified"))
    assert got == {n: get_kernel_type(n) for n in names}


@pytest.fixture(scope="module")
def gpu_marts_torch_lake(gpu_marts_torch_trace, tmp_path_factory):
    trace_path, key_averages = gpu_marts_torch_trace
    lake_dir = tmp_path_factory.mktemp("gpu_marts_torch_lake")
    _, results = build_lake(trace_path.parent, lake_dir, GPU_MARTS)
    return lake_dir, results, trace_path, key_averages


def test_op_stats_match_key_averages(gpu_marts_torch_lake):
    lake_dir, results, _, key_averages = gpu_marts_torch_lake
    for marts in results.values():
        for mart in marts:
            assert all(c.passed for c in mart.checks), (mart.name, [c for c in mart.checks if not c.passed])
    ours = {r["op_name"]: r for r in read_mart(lake_dir, "op_stats")}
    assert "ProfilerStep*" in key_averages
    assert set(ours) == set(key_averages)
    for name, ref in key_averages.items():
        o = ours[name]
        assert o["calls"] == ref["count"], name
        assert close(o["total_cpu_ns"] / 1000, ref["cpu_time_total"]), (name, o["total_cpu_ns"], ref)
        assert close(o["self_cpu_ns"] / 1000, ref["self_cpu_time_total"]), (name, o["self_cpu_ns"], ref)
        assert o["total_device_ns"] == 0 and o["self_device_ns"] == 0


def _tb_memory_rows(path: Path) -> dict[tuple[int, str], list[int]]:
    snapshot, tree = tb_memory(path)
    rows = {}
    for device, ops in snapshot.get_memory_statistics(tree).items():
        dev = -1 if device == "CPU" else int(device[3:])
        for op, values in ops.items():
            rows[(dev, op)] = [int(v) for v in values]
    return rows


MEMORY_COLS = [
    "self_size_increase_bytes", "self_allocation_bytes", "self_allocation_count",
    "size_increase_bytes", "allocation_bytes", "allocation_count", "calls",
]


def test_memory_by_op_matches_tb_plugin_on_torch_trace(gpu_marts_torch_lake):
    lake_dir, _, trace_path, _ = gpu_marts_torch_lake
    ref = _tb_memory_rows(trace_path)
    ours = {(r["device"], r["op_name"]): [int(r[c]) for c in MEMORY_COLS] for r in read_mart(lake_dir, "memory_by_op")}
    assert ref and ours == ref


def test_memory_curve_and_peak_match_tb_plugin_on_torch_trace(gpu_marts_torch_lake):
    lake_dir, _, trace_path, _ = gpu_marts_torch_lake
    snapshot, _ = tb_memory(trace_path)
    curve = {}
    for r in snapshot.memory_records:
        if r.addr is None or r.total_allocated != r.total_allocated or r.total_reserved != r.total_reserved:
            continue
        dev = -1 if r.device_name == "CPU" else int(r.device_name[3:])
        curve.setdefault(dev, []).append((int(r.total_allocated), int(r.total_reserved), int(r.bytes)))
    timeline = sorted(read_mart(lake_dir, "memory_timeline"), key=lambda r: (r["device"], r["ts_ns"], r["event_idx"]))
    ours = {}
    for r in timeline:
        ours.setdefault(r["device"], []).append((r["allocated_bytes"], r["reserved_bytes"], r["delta_bytes"]))
    assert curve and ours == curve
    peaks = {r["device"]: r for r in read_mart(lake_dir, "memory_peaks")}
    for dev, points in curve.items():
        assert peaks[dev]["peak_allocated_bytes"] == max(p[0] for p in points)
        assert peaks[dev]["peak_reserved_bytes"] == max(p[1] for p in points)
        assert peaks[dev]["peak_step"] is not None


def test_memory_by_op_matches_tb_plugin_on_legacy_resnet50(gpu_marts_shared_lake):
    """tb_plugin_resnet50's 12.8k [memory] events have no Addr and no totals: no allocator curve (only the net
    allocation since the trace began), but per-op statistics."""
    lake_dir, _ = gpu_marts_shared_lake
    rows = read_mart(lake_dir, "memory_by_op")
    timeline = [r for r in read_mart(lake_dir, "memory_timeline") if r["run_id"] == "tb_plugin_resnet50"]
    assert timeline and all(r["allocated_bytes"] is None and r["reserved_bytes"] is None for r in timeline)
    path = _trace_files("tb_plugin_resnet50")[0]
    ref = _tb_memory_rows(path)
    ours = {(r["device"], r["op_name"]): [int(r[c]) for c in MEMORY_COLS] for r in rows if r["trace_id"] == _trace_id(path)}
    assert ref and ours == ref


def test_op_stats_nesting_by_hand(tmp_path):
    """Hand-made thread: A[0,100) > B[10,50) > C[20,30); A > D[60,60) (zero length); E[100,120) after A;
    a same-name only child F[0,10)>F[2,8). Self A = 100-40-0 = 60, B = 40-10 = 30, F = 10 (merged, 1 call).
    A kernel of 7 µs launched by C (runtime corr 1, External id of C): device total A = B = C = 7, self C = 7."""
    import gzip
    import json

    def op(name, ts, dur, ext):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": {"External id": ext}}

    events = [
        op("A", 1000, 100, 1), op("B", 1010, 40, 2), op("C", 1020, 10, 3), op("D", 1060, 0, 4), op("E", 1100, 20, 5),
        {"ph": "X", "cat": "cpu_op", "name": "F", "pid": 1, "tid": 2, "ts": 1000, "dur": 10, "args": {"External id": 6}},
        {"ph": "X", "cat": "cpu_op", "name": "F", "pid": 1, "tid": 2, "ts": 1002, "dur": 6, "args": {"External id": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1022, "dur": 3,
         "args": {"External id": 3, "correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1030, "dur": 7,
         "args": {"External id": 3, "correlation": 1, "device": 0, "stream": 7}},
    ]
    run = tmp_path / "src" / "hand"
    run.mkdir(parents=True)
    with gzip.open(run / "rank-0.json.gz", "wt") as f:
        json.dump({"schemaVersion": 1, "traceEvents": events}, f)
    build_lake(tmp_path / "src", tmp_path / "lake", {"op_stats"})
    got = {r["op_name"]: (r["calls"], r["total_cpu_ns"], r["self_cpu_ns"], r["total_device_ns"], r["self_device_ns"])
           for r in read_mart(tmp_path / "lake", "op_stats")}
    assert got == {
        "A": (1, 100_000, 60_000, 7_000, 0),
        "B": (1, 40_000, 30_000, 7_000, 0),
        "C": (1, 10_000, 10_000, 7_000, 7_000),
        "D": (1, 0, 0, 0, 0),
        "E": (1, 20_000, 20_000, 0, 0),
        "F": (1, 10_000, 10_000, 0, 0),
    }
