"""step_mfu: FLOPs per step against torch's own count (with_flops=True) on CPU training runs made here, with and
without activation checkpointing (whose recomputation is hardware FLOPs, not model FLOPs), and the utilization
against each GPU's dense peak on hand-built traces of one bf16/fp16 GEMM per step."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from diag_fixtures import BASE_NS
from gpu_marts_helpers import build_lake, read_mart

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")

# The ops whose FLOPs torch counts that MFU counts too (matrix products; torch also counts elementwise mul/add).
TORCH_MATRIX_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::conv1d", "aten::conv2d",
                    "aten::conv3d"}
BATCH = 4
# the conv's forward: 2 x |output [batch, 8, 6, 6]| x |weight[1:] [3, 3, 3]|; its backward, which torch's with_flops
# leaves out, is its weight gradient only (the images need none; the bias gradient counts no FLOPs), as many
CONV_FLOPS = CONV_BACKWARD_FLOPS = 2 * BATCH * 8 * 6 * 6 * 3 * 3 * 3
# the conv's and fc2's forward, run again in backward when their blocks are checkpointed (fc2: 2 x batch x 64 x 64)
RECOMPUTED_FLOPS = CONV_FLOPS + 2 * BATCH * 64 * 64


def _train(folder: Path, recompute: bool) -> list[int]:
    """Three steps of a small CNN (conv, then three linears; the conv and the middle linear in blocks checkpointed
    when ``recompute``), the last two profiled; returns torch's FLOPs of the matrix products of each profiled step, in
    order, from the profiler's own events, and the conv's backward (CONV_BACKWARD_FLOPS)."""
    import torch
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, schedule
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    conv, fc1, fc2, fc3 = nn.Conv2d(3, 8, 3), nn.Linear(288, 64), nn.Linear(64, 64), nn.Linear(64, 10)
    params = [p for m in (conv, fc1, fc2, fc3) for p in m.parameters()]
    optimizer = torch.optim.SGD(params, lr=0.01)
    images, labels = torch.randn(BATCH, 3, 8, 8), torch.randint(0, 10, (BATCH,))

    def conv_block(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(conv(x))

    def block(h: torch.Tensor) -> torch.Tensor:
        return torch.relu(fc2(h))

    per_step: list[int] = []

    def on_ready(prof: profile) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(folder / "rank-0.pt.trace.json"))
        events = prof.events()
        # the exported trace's ProfilerStep#N ranges, which torch's events name ProfilerStep*
        steps = sorted((e for e in events if e.name.startswith("ProfilerStep")), key=lambda e: e.time_range.start)
        per_step.extend(CONV_BACKWARD_FLOPS + sum(
            e.flops or 0 for e in events
            if e.name in TORCH_MATRIX_OPS and step.time_range.start <= e.time_range.start < step.time_range.end
        ) for step in steps)

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True,
                 schedule=schedule(wait=0, warmup=1, active=2), on_trace_ready=on_ready) as prof:
        for _ in range(3):
            h = checkpoint(conv_block, images, use_reentrant=False) if recompute else conv_block(images)
            h = torch.relu(fc1(h.flatten(1)))
            h = checkpoint(block, h, use_reentrant=False) if recompute else block(h)
            nn.functional.cross_entropy(fc3(h), labels).backward()
            optimizer.step()
            optimizer.zero_grad()
            prof.step()
    return per_step


def _gemm_step_trace(folder: Path, device_name: str, dtype: str, *, file: str = "rank-0.json", at_us: int = 1000,
                     steps: int = 1, profiler_steps: bool = True, kernel_us: int = 700, custom_us: int = 0) -> None:
    """``steps`` steps of 1000 µs from ``at_us`` on a GPU named ``device_name`` (without ``profiler_steps``, no
    ProfilerStep#N: the trace is one step), each an aten::mm of two 4096 x 4096 ``dtype`` matrices (2 x 4096^3
    FLOPs) launching its kernel, which runs ``kernel_us`` from 200 µs into its step or the previous kernel's end;
    with ``custom_us``, an op of no known FLOPs then launches a kernel of that long, right after the GEMM's."""
    events, kernel_end = [], 0
    for index in range(steps):
        start, correlation = at_us + 1000 * index, 9 + index
        kernel_start = max(start + 200, kernel_end)
        kernel_end = kernel_start + kernel_us
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{index + 1}", "pid": 1, "tid": 1,
             "ts": start, "dur": 1000, "args": {"External id": 1}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": start + 100, "dur": 50,
             "args": {"External id": 2, "Input Dims": [[4096, 4096], [4096, 4096]], "Input type": [dtype, dtype],
                      "Sequence number": 7}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": start + 110,
             "dur": 10, "args": {"External id": 2, "correlation": correlation}},
            {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm", "pid": 0, "tid": 7, "ts": kernel_start,
             "dur": kernel_us, "args": {"External id": 2, "correlation": correlation, "device": 0, "stream": 7}},
        ]
        if custom_us:
            events += [
                {"ph": "X", "cat": "cpu_op", "name": "custom::fused_block", "pid": 1, "tid": 1, "ts": start + 300,
                 "dur": 50, "args": {"External id": 3}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": start + 310,
                 "dur": 10, "args": {"External id": 3, "correlation": 100 + index}},
                {"ph": "X", "cat": "kernel", "name": "custom_fused_kernel", "pid": 0, "tid": 7, "ts": kernel_end,
                 "dur": custom_us, "args": {"External id": 3, "correlation": 100 + index, "device": 0, "stream": 7}},
            ]
            kernel_end += custom_us
    if not profiler_steps:
        events = [event for event in events if event["cat"] != "user_annotation"]
    trace = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": device_name}], "traceEvents": events,
             "baseTimeNanoseconds": BASE_NS}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / file).write_text(json.dumps(trace))


# GPU name -> (dtype of the GEMM, dense peak in TFLOP/s from the vendor's data sheet)
GPUS = {
    "Tesla V100-SXM2-32GB": ("c10::Half", 125.0),
    "NVIDIA A100-SXM4-80GB": ("c10::BFloat16", 312.0),
    "NVIDIA H100 80GB HBM3": ("c10::BFloat16", 989.4),
    "NVIDIA H200": ("c10::BFloat16", 989.4),
    "NVIDIA B200": ("c10::BFloat16", 2250.0),
    "AMD Instinct MI210": ("c10::BFloat16", 181.0),
    "AMD Instinct MI250X / MI250": ("c10::BFloat16", 383.0),
    "AMD Instinct MI300X": ("c10::BFloat16", 1307.4),
    "NVIDIA Hypothetical X1": ("c10::BFloat16", None),
}


@pytest.fixture(scope="module")
def mfu(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict[str, list[int]]]:
    src = tmp_path_factory.mktemp("mfu_src")
    torch_flops = {run: _train(src / run, recompute=run == "checkpointed") for run in ("plain", "checkpointed")}
    for i, (name, (dtype, _)) in enumerate(GPUS.items()):
        _gemm_step_trace(src / f"gpu{i}", name, dtype)
    # the host launches the GEMM in 150 µs and the trace ends; its kernel runs 2000 µs more
    _gemm_step_trace(src / "gpu_behind", "NVIDIA H100 80GB HBM3", "c10::BFloat16", profiler_steps=False,
                     kernel_us=2000)
    # three steps whose GEMMs take 2000 µs each: the host runs further ahead of the GPU at every step
    _gemm_step_trace(src / "gpu_queued", "NVIDIA H100 80GB HBM3", "c10::BFloat16", steps=3, kernel_us=2000)
    # the GEMM's 700 µs kernel and 100 µs of a custom op's, whose FLOPs nothing knows
    _gemm_step_trace(src / "gpu_custom", "NVIDIA H100 80GB HBM3", "c10::BFloat16", kernel_us=700, custom_us=100)
    # one rank profiled twice, each profiler numbering its steps from the same number
    for file, at_us in (("rank-0.a.json", 1000), ("rank-0.b.json", 50_000)):
        _gemm_step_trace(src / "two_windows", "NVIDIA H100 80GB HBM3", "c10::BFloat16", file=file, at_us=at_us)
    lake = tmp_path_factory.mktemp("mfu_lake")
    build_lake(src, lake, {"step_mfu"})
    rows: dict[str, dict[int, dict]] = {}
    for row in read_mart(lake, "step_mfu"):
        if row["run_id"] != "two_windows":
            rows.setdefault(row["run_id"], {})[row["step"]] = row
    two_windows = [row for row in read_mart(lake, "step_mfu") if row["run_id"] == "two_windows"]
    return rows, torch_flops, two_windows


def test_model_flops_per_step_are_torchs_count(mfu) -> None:
    rows, torch_flops, _ = mfu
    assert sorted(rows["plain"]) == [1, 2] and len(torch_flops["plain"]) == 2
    for step, flops in zip((1, 2), torch_flops["plain"], strict=False):
        row = rows["plain"][step]
        assert row["model_flops"] == row["hardware_flops"] == flops > 0
        assert row["dtype"] == "fp32" and row["rank"] == 0
        assert row["achieved_tflops_per_s"] == pytest.approx(flops / row["step_ns"] / 1000)
        # a CPU trace: no GPU, no peak, no ratio
        assert row["peak_tflops_per_s"] is None and row["mfu_ratio"] is None


def test_recomputation_is_hardware_flops_only(mfu) -> None:
    """torch counts every GEMM it ran, the checkpointed block's forward twice: that is hardware FLOPs; the model
    did the plain run's work."""
    rows, torch_flops, _ = mfu
    for step, flops in zip((1, 2), torch_flops["checkpointed"], strict=False):
        row = rows["checkpointed"][step]
        assert row["hardware_flops"] == flops
        assert row["hardware_flops"] - row["model_flops"] == RECOMPUTED_FLOPS
        assert row["model_flops"] == rows["plain"][step]["model_flops"]


@pytest.mark.parametrize("index", range(len(GPUS)))
def test_mfu_against_each_gpus_dense_peak(mfu, index: int) -> None:
    rows, _, _ = mfu
    name, (dtype, peak) = list(GPUS.items())[index]
    (row,) = rows[f"gpu{index}"].values()
    flops = 2 * 4096**3
    achieved = flops / 1_000_000 / 1000  # FLOPs per ns of the 1000 µs step, in TFLOP/s
    expected_dtype = "fp16" if "Half" in dtype else "bf16"
    assert (row["model_flops"], row["step_ns"], row["dtype"]) == (flops, 1_000_000, expected_dtype)
    assert row["achieved_tflops_per_s"] == pytest.approx(achieved)
    if peak is None:
        assert row["peak_tflops_per_s"] is None and row["mfu_ratio"] is None, name
    else:
        assert row["peak_tflops_per_s"] == pytest.approx(peak), name
        assert row["mfu_ratio"] == pytest.approx(achieved / peak), name


def test_a_step_lasts_until_the_device_work_it_launched_ends(mfu) -> None:
    """Without ProfilerStep#N the one step is the host's range (150 µs of launching): the GEMM's 2000 µs kernel ends
    2100 µs after the step started, and the step's time runs until then, so MFU stays below the peak."""
    rows, _, _ = mfu
    (row,) = rows["gpu_behind"].values()
    assert row["step_ns"] == 2_100_000
    assert row["mfu_ratio"] == pytest.approx(2 * 4096**3 / 2_100_000 / 1000 / 989.4)


def test_a_host_running_ahead_times_steps_on_the_device_side(mfu) -> None:
    """Kernels queue on the stream: step 1's ends at 3200 µs, step 2's at 5200, step 3's at 7200 (from 1000). Each
    step runs from the previous one's end to its own kernel's end: 2200, 2000, 2000 µs, summing to the span,
    where host ranges (1000 µs) would triple MFU and ranges reaching to their kernels would overlap."""
    rows, _, _ = mfu
    assert {step: row["step_ns"] for step, row in rows["gpu_queued"].items()} == {
        1: 2_200_000, 2: 2_000_000, 3: 2_000_000}
    assert all(row["mfu_ratio"] < 1 for row in rows["gpu_queued"].values())


def test_mfu_says_the_share_of_work_whose_flops_are_known(mfu) -> None:
    """flops_known_ratio: the step's device time in ops with known FLOPs over its top-level ops' (ProfilerStep#1
    holds both kernels); a CPU run's host time alike."""
    rows, _, _ = mfu
    assert rows["gpu0"][1]["flops_known_ratio"] == 1.0
    (custom,) = rows["gpu_custom"].values()
    assert custom["flops_known_ratio"] == pytest.approx(700 / 800)
    assert custom["model_flops"] == 2 * 4096**3  # the custom op adds no FLOPs, only unaccounted time
    for row in rows["plain"].values():  # the MLP's GEMMs, activations and optimizer: part of the step has FLOPs
        assert 0 < row["flops_known_ratio"] < 1


def test_steps_numbered_alike_in_two_traces_of_a_rank_are_rows_of_each(mfu) -> None:
    _, _, two_windows = mfu
    assert sorted((row["rank"], row["step"]) for row in two_windows) == [(0, 1), (0, 1)]
    assert len({row["trace_id"] for row in two_windows}) == 2
    assert {row["model_flops"] for row in two_windows} == {2 * 4096**3}
