"""op_perf on the patterns real traces showed wrong (issue 36), on traces torch makes here on the CPU with the same
ops and shapes: broadcast elementwise ops (an MI300X Qwen inference trace's ``aten::mul`` of ``[4096]`` and
``[1, 512, 4096]``, ``[1024]``·``[16, 559, 1024]``, ``add_`` of ``[1, 1024, 512]`` and ``[512]``) and ops that call
ops (``aten::linear`` and its ``addmm``, ``matmul`` and ``mm``/``bmm``, attention and its flash op), whose FLOPs a
sum over op_perf counted twice. And a scalar overload that forwards to the tensor overload of its name (``aten::add``
of ``[[1], [], []]`` typed ``Scalar`` calling the one typed ``long int``, as on an MI300X normalization trace in
TraceLens' test data): TraceLens' per-category sheets count both, torch's key_averages counts one call.

Oracles: torch's own broadcasting (``torch.broadcast_shapes``) and FLOP count (``with_flops=True``,
``key_averages()``); bytes as TraceLens' BinaryElementwise model has them (both inputs and the output, the output
in the wider dtype of two tensors), worked out by hand.

And the families real traces showed op_perf without: CNN training's ``aten::convolution_backward`` (an MI300X
ResNet trace; oracle: torch's ``FlopCounterMode``), group and instance norm (TraceLens' normalization test trace),
and the vendor GEMMs of AMD inference traces (sglang's ``aiter::gemm_a16w16``, vLLM's
``vllm::rocm_unquantized_gemm``), on a trace built by hand with the arguments those traces record. And training's
backward ops: attention's (for MFU of transformer training; oracle: ``FlopCounterMode``) and the native norms'
(TraceLens' normalization test trace; TraceLens' formulas by hand).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gpu_marts_helpers import build_lake, read_mart

# (first, second) operand shapes of the broadcast elementwise calls seen on real traces
BROADCASTS = {
    "aten::mul": [((4096,), (1, 512, 4096)), ((1024,), (16, 559, 1024))],
    "aten::add_": [((1, 1024, 512), (512,))],
}


def _profile_broadcasts(out: Path) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for first, second in BROADCASTS["aten::mul"]:
            torch.ones(first) * torch.ones(second)
        for first, second in BROADCASTS["aten::add_"]:
            torch.ones(first).add_(torch.ones(second))
    out.parent.mkdir(parents=True)
    prof.export_chrome_trace(str(out))


def _profile_nested(out: Path):  # -> torch.profiler.profile
    """Ops that call the ops torch counts FLOPs for: linear (addmm), matmul (mm, bmm), conv2d (down to
    _convolution), causal attention (its CPU flash op) and a same-shape add."""
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    linear, x = torch.nn.Linear(64, 32), torch.randn(4, 8, 64)
    q = torch.randn(2, 4, 16, 8)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        y = linear(x)
        torch.matmul(x, torch.randn(64, 16))
        torch.matmul(torch.randn(3, 5, 7), torch.randn(3, 7, 2))
        F.conv2d(torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3), torch.randn(4))
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
        torch.add(y, y)
    out.parent.mkdir(parents=True)
    prof.export_chrome_trace(str(out))
    return prof


def _profile_scalar_overloads(out: Path):  # -> torch.profiler.profile
    """add.Scalar and div.Scalar, each forwarding to its .Tensor overload (a wrapped scalar) as its only child."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    step, activation = torch.tensor([1]), torch.ones(10, 512, 7, 7, dtype=torch.bfloat16)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(6):
            torch.ops.aten.add.Scalar(step, 1)
        for _ in range(3):
            torch.ops.aten.div.Scalar(activation, 49)
    out.parent.mkdir(parents=True)
    prof.export_chrome_trace(str(out))
    return prof


def _profile_typed(out: Path) -> None:
    """Calls whose bytes hang on their arguments' types: batch_norm in training with and without weight and bias,
    a multiply of a 0-dim double by a float tensor into an out= float tensor, and adds of one shape in float and
    in bool (a type TraceLens' name2bpe has no size for)."""
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    x, stats = torch.randn(2, 3, 4, 4), torch.zeros(3)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        F.batch_norm(x, stats.clone(), stats.clone() + 1, torch.ones(3), torch.zeros(3), training=True)
        F.batch_norm(torch.randn(2, 5, 4, 4), torch.zeros(5), torch.ones(5), training=True)
        torch.mul(torch.tensor(2.0, dtype=torch.float64), torch.ones(125), out=torch.empty(125))
        for dtype in (torch.float32, torch.float32, torch.bool):
            torch.add(torch.ones(10, dtype=dtype), torch.ones(10, dtype=dtype))
    out.parent.mkdir(parents=True)
    prof.export_chrome_trace(str(out))


# convolutions run forward and backward: (input shape, input needs its gradient, weight shape, bias, keyword args)
CONVOLUTIONS = [
    ((2, 3, 8, 8), True, (4, 3, 3, 3), True, {"padding": 1}),  # output_mask [True, True, True]
    ((2, 4, 6, 6), False, (6, 4, 3, 3), False, {"stride": 2}),  # a first layer: [False, True, False]
    ((1, 4, 5, 5), True, (4, 2, 3, 3), False, {"stride": 2, "transposed": True}),  # [True, True, False]
]


def _run_convolutions(count: bool) -> dict[tuple[int, ...], int]:
    """Each of CONVOLUTIONS forward and backward; with ``count``, its gradient output's shape -> torch's
    FlopCounterMode count of its convolution_backward (not under the profiler: the mode calls each op again)."""
    import contextlib

    import torch
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    counts = {}
    for x_shape, x_grad, w_shape, bias, kwargs in CONVOLUTIONS:
        kwargs = dict(kwargs)
        conv = F.conv_transpose2d if kwargs.pop("transposed", False) else F.conv2d
        x = torch.randn(x_shape, requires_grad=x_grad)
        w, b = torch.randn(w_shape, requires_grad=True), torch.randn(w_shape[0], requires_grad=True) if bias else None
        y = conv(x, w, b, **kwargs)
        with FlopCounterMode(display=False) if count else contextlib.nullcontext() as counter:
            y.backward(torch.ones_like(y))
        if count:
            counts[tuple(y.shape)] = counter.get_flop_counts()["Global"][torch.ops.aten.convolution_backward]
    return counts


def _profile_conv_backward(out: Path) -> None:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        _run_convolutions(count=False)
    out.parent.mkdir(parents=True)
    prof.export_chrome_trace(str(out))


# attention run forward and backward on the CPU (its flash op): (query shape, key and value shape, causal)
ATTENTIONS = [((2, 4, 16, 8), (2, 4, 12, 8), False), ((2, 4, 16, 8), (2, 4, 16, 8), True)]


def _profile_attention_backward(out: Path) -> None:
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for q_shape, kv_shape, causal in ATTENTIONS:
            q, k, v = (torch.randn(s, requires_grad=True) for s in (q_shape, kv_shape, kv_shape))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            y.backward(torch.ones_like(y))
    out.parent.mkdir(parents=True)
    prof.export_chrome_trace(str(out))


def _count_attention_backward(q_shape, kv_shape, causal: bool) -> int:
    """torch's FlopCounterMode count of a flash attention backward of these shapes (it has no formula for the CPU
    op, so the CUDA op's, run on meta tensors)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    op = torch.ops.aten._scaled_dot_product_flash_attention_backward
    q, kv = torch.empty(q_shape, device="meta"), torch.empty(kv_shape, device="meta")
    with FlopCounterMode(display=False) as counter:
        op(q, q, kv, kv, q, torch.empty(q_shape[:3], device="meta"), None, None, q_shape[2], kv_shape[2], 0.0,
           causal, torch.empty(2, device="meta"), torch.empty(2, device="meta"))
    return counter.get_flop_counts()["Global"][op]


def _profile_norm_backward(out: Path) -> None:
    """batch_norm forward and backward in training and in eval, layer_norm without and with weight and bias (and one
    whose input needs no gradient), group_norm: each over float32 [2, 6, 4, 4] but eval batch_norm's [1, 6, 4, 4] and
    the last layer_norm's [3, 6, 4, 4]."""
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)

    def params(*shape):
        return torch.ones(shape, requires_grad=True), torch.zeros(shape, requires_grad=True)

    x = torch.randn(2, 6, 4, 4, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        F.batch_norm(x, torch.zeros(6), torch.ones(6), *params(6), training=True).sum().backward()
        F.batch_norm(x[:1], torch.zeros(6), torch.ones(6), *params(6), training=False).sum().backward()
        F.layer_norm(x, (4, 4)).sum().backward()
        F.layer_norm(x, (4, 4), *params(4, 4)).sum().backward()
        F.layer_norm(torch.randn(3, 6, 4, 4), (4, 4), *params(4, 4)).sum().backward()
        F.group_norm(x, 3, *params(6)).sum().backward()
    out.parent.mkdir(parents=True)
    prof.export_chrome_trace(str(out))


def _profile_group_instance_norm(out: Path) -> None:
    """group_norm with and without weight and bias, instance_norm on batch statistics and on running ones."""
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    x, ones, zeros = torch.randn(2, 6, 4, 4), torch.ones(6), torch.zeros(6)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        F.group_norm(x, 3, ones, zeros)
        F.group_norm(x, 2)
        F.instance_norm(x, weight=ones, bias=zeros)
        F.instance_norm(x, zeros, ones, use_input_stats=False)
    out.parent.mkdir(parents=True)
    prof.export_chrome_trace(str(out))


BF16 = "c10::BFloat16"


def _vendor_gemm_trace(out: Path) -> None:
    """AMD inference traces' GEMM ops, with the arguments they record: vLLM's rocm_unquantized_gemm (x, weight,
    bias) calling aiter's gemm_a16w16 (x, w, bias, dtype, y, ...); sglang's gemm_a16w16 without bias; aiter's
    gemm_a16w16_atomic_ (x, w, dtype, y, config)."""

    def op(name: str, ts: int, dur: int, dims: list, types: list, concrete: list) -> dict:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": {"External id": ts, "Input Dims": dims, "Input type": types, "Concrete Inputs": concrete}}

    events = [
        op("vllm::rocm_unquantized_gemm", 100, 50, [[32, 2880], [5120, 2880], [5120]], [BF16] * 3, [""] * 3),
        op("aiter::gemm_a16w16", 110, 30, [[32, 2880], [5120, 2880], [5120], [], [], [], []],
           [BF16, BF16, BF16, "Scalar", "", "", ""], ["", "", "", "15", "", "", ""]),
        op("aiter::gemm_a16w16", 200, 50, [[15360, 4096], [6144, 4096], [], [], [], [], []],
           [BF16, BF16, "", "Scalar", "", "", ""], ["", "", "", "15", "", "", ""]),
        op("aiter::gemm_a16w16_atomic_", 300, 50, [[64, 4096], [1024, 4096], [], [64, 1024], []],
           [BF16, BF16, "Scalar", BF16, ""], ["", "", "15", "", ""]),
    ]
    trace = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "AMD Instinct MI300X"}],
             "traceEvents": events, "baseTimeNanoseconds": 1_700_000_000_000_000_000}
    out.parent.mkdir(parents=True)
    out.write_text(json.dumps(trace))


@pytest.fixture(scope="module")
def op_perf_rows(tmp_path_factory: pytest.TempPathFactory):
    """op_perf and op_stats_by_shape rows by mart and run, torch's FLOPs of the nested run and torch's counts of the
    scalar-overload run, by (op, shapes)."""
    root = tmp_path_factory.mktemp("op_perf")
    _profile_broadcasts(root / "src" / "broadcasts" / "rank-0.pt.trace.json")
    prof = _profile_nested(root / "src" / "nested" / "rank-0.pt.trace.json")
    torch_flops = {(e.key, json.dumps(e.input_shapes)): e.flops for e in prof.key_averages(group_by_input_shape=True)}
    prof = _profile_scalar_overloads(root / "src" / "scalars" / "rank-0.pt.trace.json")
    torch_counts = {(e.key, json.dumps(e.input_shapes)): e.count for e in prof.key_averages(group_by_input_shape=True)}
    _profile_typed(root / "src" / "typed" / "rank-0.pt.trace.json")
    _profile_conv_backward(root / "src" / "conv_backward" / "rank-0.pt.trace.json")
    _profile_group_instance_norm(root / "src" / "norms" / "rank-0.pt.trace.json")
    _profile_attention_backward(root / "src" / "attention_backward" / "rank-0.pt.trace.json")
    _profile_norm_backward(root / "src" / "norm_backward" / "rank-0.pt.trace.json")
    _vendor_gemm_trace(root / "src" / "vendor_gemm" / "rank-0.pt.trace.json")
    build_lake(root / "src", root / "lake", {"op_perf", "op_stats_by_shape"})
    rows: dict[str, dict[str, list[dict]]] = {}
    for mart in ("op_perf", "op_stats_by_shape"):
        for row in read_mart(root / "lake", mart):
            rows.setdefault(mart, {}).setdefault(row["run_id"], []).append(row)
    return rows, torch_flops, torch_counts


def test_broadcast_elementwise_flops_and_bytes(op_perf_rows) -> None:
    """Shapes broadcast from the right: a multiply of [4096] by [1, 512, 4096] is 512·4096 multiplies, not 4096x."""
    import torch

    rows = op_perf_rows[0]["op_perf"]
    ours = {(r["op_name"], tuple(tuple(d) for d in json.loads(r["input_dims"])[:2])): r for r in rows["broadcasts"]}
    for op, pairs in BROADCASTS.items():
        for first, second in pairs:
            row = ours[(op, (first, second))]
            out = math.prod(torch.broadcast_shapes(first, second))
            assert row["flops"] == out, (op, first, second, row["flops"])
            # float32 inputs and output (TraceLens: nelems_in1·bpe + nelems_in2·bpe + nelems_out·bpe)
            assert row["bytes"] == 4 * (math.prod(first) + math.prod(second) + out), (op, first, second, row["bytes"])


def test_owns_flops_counts_each_flop_once(op_perf_rows) -> None:
    """linear/matmul/conv2d/attention call the ops that do the work: only the ops below own the FLOPs, and the
    owners' sum is torch's own count of the run (torch counts addmm, mm, bmm, conv2d and add, never a caller)."""
    rows, torch_flops, _ = op_perf_rows
    nested = rows["op_perf"]["nested"]
    owners = {r["op_name"] for r in nested if r["owns_flops"]}
    callers = {r["op_name"] for r in nested if not r["owns_flops"]}
    assert callers == {"aten::linear", "aten::matmul", "aten::conv2d", "aten::convolution",
                       "aten::scaled_dot_product_attention"}
    assert {"aten::addmm", "aten::mm", "aten::bmm", "aten::_convolution", "aten::add",
            "aten::_scaled_dot_product_flash_attention_for_cpu"} <= owners
    # the CPU addmm copies its bias into the output (aten::copy_): other work, which leaves addmm its FLOPs
    assert "aten::copy_" in owners

    counted = {"GEMM", "CONV", "binary_elementwise"}  # the families torch counts
    ours = sum(r["flops"] for r in nested if r["owns_flops"] and r["family"] in counted)
    assert ours == sum(torch_flops.values()) > 0
    assert sum(r["flops"] for r in nested if r["family"] in counted) > ours  # every row: counted more than once
    # causal attention [2, 4, 16, 8]: 2·B·H·N·N·(d_qk + d_v) / 2, once, on the flash op
    attention = [r["flops"] for r in nested if r["family"] == "SDPA" and r["owns_flops"]]
    assert attention == [2 * 2 * 4 * 16 * 16 * (8 + 8) // 2]


def test_scalar_overload_is_one_call_as_torch_counts(op_perf_rows) -> None:
    """add.Scalar forwarding to add.Tensor is one call (torch's EventList._remove_dup_nodes folds an only child of
    the same name into its caller), in op_stats_by_shape and op_perf alike; its FLOPs are counted once."""
    rows, _, torch_counts = op_perf_rows
    stats = {(r["op_name"], json.dumps(json.loads(r["input_dims"]))): r["calls"] for r in rows["op_stats_by_shape"]["scalars"]}
    assert stats == torch_counts
    perf = {r["op_name"]: r for r in rows["op_perf"]["scalars"]}
    assert perf["aten::add"]["calls"] == 6 and perf["aten::add"]["flops"] == 6
    assert perf["aten::div"]["calls"] == 3 and perf["aten::div"]["flops"] == 3 * 10 * 512 * 7 * 7


def test_bytes_follow_each_arguments_type(op_perf_rows) -> None:
    """Bytes as TraceLens' models count them, worked out by hand for float32 (4 bytes): batch_norm in training reads
    and writes the input (2·E) and touches mean, variance, both running stats and, where given, weight and bias (C
    each); a binary op writes its out= tensor in that tensor's type; a shape with a call of a type without a size
    (bool) has no bytes rather than those of its other calls."""
    rows = op_perf_rows[0]["op_perf"]["typed"]
    norms = {json.loads(r["input_dims"])[0][1]: r for r in rows if r["op_name"] == "aten::batch_norm"}
    assert norms[3]["bytes"] == (2 * 2 * 3 * 4 * 4 + 6 * 3) * 4  # weight and bias
    assert norms[5]["bytes"] == (2 * 2 * 5 * 4 * 4 + 4 * 5) * 4  # neither
    (mul,) = [r for r in rows if r["op_name"] == "aten::mul"]
    assert json.loads(mul["input_dims"])[:3] == [[], [125], [125]]
    assert mul["bytes"] == 8 + 125 * 4 + 125 * 4 and mul["flops"] == 125
    (add,) = [r for r in rows if r["op_name"] == "aten::add" and json.loads(r["input_dims"])[:2] == [[10], [10]]]
    assert add["calls"] == 3 and add["flops"] == 3 * 10 and add["bytes"] is None


def test_convolution_backward_is_conv_work(op_perf_rows) -> None:
    """convolution_backward is the CONV family's (step_mfu counts it) and owns its FLOPs: each gradient output_mask
    asks for is the forward's FLOPs again (TraceLens' grad input and grad weight), torch's FlopCounterMode count;
    bytes by hand, float32: each gradient reads grad_output, input and weight, the bias gradient grad_output and
    C_out."""
    rows = op_perf_rows[0]["op_perf"]["conv_backward"]
    ours = {tuple(json.loads(r["input_dims"])[0]): r for r in rows if r["op_name"] == "aten::convolution_backward"}
    assert ours.keys() == (torch_counts := _run_convolutions(count=True)).keys()
    for grad_out, row in ours.items():
        assert row["family"] == "CONV" and row["owns_flops"], row
        assert row["flops"] == torch_counts[grad_out], (grad_out, row["flops"])
    # [2, 4, 8, 8] from [2, 3, 8, 8] * [4, 3, 3, 3] + bias: both gradients of 2·512·27 FLOPs, and the bias's
    assert ours[(2, 4, 8, 8)]["flops"] == 2 * (2 * 512 * 27)
    assert ours[(2, 4, 8, 8)]["bytes"] == (2 * (512 + 384 + 108) + 512 + 4) * 4
    # a first layer's: the weight gradient only
    assert ours[(2, 6, 2, 2)]["flops"] == 2 * 48 * 36 and ours[(2, 6, 2, 2)]["bytes"] == (48 + 288 + 216) * 4
    # transposed [1, 4, 5, 5] -> [1, 2, 11, 11]: 2·|input|·|weight[1:]| per gradient
    assert ours[(1, 2, 11, 11)]["flops"] == 2 * (2 * 100 * 18)
    assert ours[(1, 2, 11, 11)]["bytes"] == 2 * (242 + 100 + 72) * 4


def test_group_and_instance_norm(op_perf_rows) -> None:
    """TraceLens' GroupNorm and InstanceNorm, by hand for [2, 6, 4, 4] float32 (E = 192, C = 6): 6·C + 5·E FLOPs
    on batch statistics (6·C + 2·E on running ones); bytes 2·E + C per mean, variance, weight and bias given, and
    2 running statistics on batch statistics. group_norm calls native_group_norm and instance_norm calls batch_norm:
    the op below owns the normalization FLOPs."""
    rows = op_perf_rows[0]["op_perf"]["norms"]
    ours = {(r["op_name"], tuple(map(bool, json.loads(r["input_dims"])[1:5]))): r for r in rows}
    E, C = 192, 6
    expected = {
        ("aten::group_norm", (False, True, True, False)): (6 * C + 5 * E, (2 * E + 6 * C) * 4, False),
        ("aten::native_group_norm", (True, True, False, False)): (6 * C + 5 * E, (2 * E + 6 * C) * 4, True),
        ("aten::group_norm", (False, False, False, False)): (6 * C + 5 * E, (2 * E + 4 * C) * 4, False),
        ("aten::native_group_norm", (False, False, False, False)): (6 * C + 5 * E, (2 * E + 4 * C) * 4, True),
        ("aten::instance_norm", (True, True, False, False)): (6 * C + 5 * E, (2 * E + 6 * C) * 4, False),
        ("aten::instance_norm", (False, False, True, True)): (6 * C + 2 * E, (2 * E + 2 * C) * 4, False),
    }
    for key, (flops, nbytes, owns) in expected.items():
        row = ours[key]
        assert (row["flops"], row["bytes"], row["owns_flops"]) == (flops, nbytes, owns), key
        assert row["family"] == ("group_norm" if "group" in key[0] else "instance_norm")
    # the batch_norm inside instance_norm, over [1, 12, 4, 4], owns
    assert {r["owns_flops"] for r in rows if r["op_name"] == "aten::native_batch_norm"} == {True}


def test_vendor_gemms(op_perf_rows) -> None:
    """aiter's and vLLM's GEMMs are 2·M·N·K of x [M, K] and weight [N, K] (TraceLens' gemm_a16w16 and
    vllm_rocm_unquantized_gemm, bias add left out as for aten GEMMs); bytes x, weight, output and bias, bf16. The
    vLLM op calling aiter's owns no FLOPs: aiter's does."""
    rows = op_perf_rows[0]["op_perf"]["vendor_gemm"]
    ours = {(r["op_name"], json.loads(r["input_dims"])[0][0]): r for r in rows}
    expected = {
        ("vllm::rocm_unquantized_gemm", 32): (32, 5120, 2880, 5120, False),
        ("aiter::gemm_a16w16", 32): (32, 5120, 2880, 5120, True),
        ("aiter::gemm_a16w16", 15360): (15360, 6144, 4096, 0, True),
        ("aiter::gemm_a16w16_atomic_", 64): (64, 1024, 4096, 0, True),
    }
    assert ours.keys() == expected.keys()
    for key, (m, n, k, bias, owns) in expected.items():
        row = ours[key]
        assert row["family"] == "GEMM" and row["owns_flops"] == owns, key
        assert row["flops"] == 2 * m * n * k, key
        assert row["bytes"] == (m * k + n * k + m * n + bias) * 2 and row["bytes_per_element"] == 2, key


def test_attention_backward_is_sdpa_work(op_perf_rows) -> None:
    """The CPU flash attention's backward op is the SDPA family's (step_mfu counts it) and owns its FLOPs: torch's
    FlopCounterMode count, 2·B·H·Nq·Nkv·(3·d_qk + 2·d_v), halved when causal as our forward (torch does not halve);
    bytes by hand, float32: q, k, v, out and grad_out read, grad q, k and v written."""
    rows = op_perf_rows[0]["op_perf"]["attention_backward"]
    ours = {json.loads(r["input_dims"])[2][2]: r for r in rows
            if r["op_name"] == "aten::_scaled_dot_product_flash_attention_for_cpu_backward"}
    assert ours.keys() == {12, 16}
    for q_shape, kv_shape, causal in ATTENTIONS:
        row = ours[kv_shape[2]]
        assert row["family"] == "SDPA" and row["owns_flops"] and row["calls"] == 1, row
        counted = _count_attention_backward(q_shape, kv_shape, causal)
        assert row["flops"] == (counted // 2 if causal else counted), (kv_shape, row["flops"], counted)
    assert ours[12]["flops"] == 2 * 2 * 4 * 16 * 12 * (3 * 8 + 2 * 8)
    assert ours[16]["flops"] == 2 * 2 * 4 * 16 * 16 * (3 * 8 + 2 * 8) // 2
    assert ours[12]["bytes"] == (2 * (1024 + 768 + 768) + 2 * 1024) * 4
    assert ours[16]["bytes"] == (2 * 3 * 1024 + 2 * 1024) * 4


def test_norm_backward(op_perf_rows) -> None:
    """The native norms' backward ops, TraceLens' Normalization backward by hand (float32, E = |input|, C: batch
    norm's channels, layer norm's normalized size, group norm's channels ÷ groups): FLOPs 4·E, 3·C more in eval, and
    for grad input 5·E training (2·E eval); bytes grad_out and input (E each), grad input where asked and training
    (E), invstd training (C), weight (C) and, training, grad weight and grad bias (C each). Each is its forward's
    family and owns its FLOPs: a backward op calls no norm op."""
    rows = op_perf_rows[0]["op_perf"]["norm_backward"]
    weight_arg = {"aten::native_batch_norm_backward": 2, "aten::native_layer_norm_backward": 5,
                  "aten::native_group_norm_backward": 4}
    ours = {}
    for row in rows:
        if row["op_name"] in weight_arg:
            dims = json.loads(row["input_dims"])
            ours[(row["op_name"], dims[1][0], bool(dims[weight_arg[row["op_name"]]]))] = row
    E = 192
    expected = {
        # batch_norm training: 9·E; bytes 3·E + C invstd + C weight + 2·C grads
        ("aten::native_batch_norm_backward", 2, True): (9 * E, (3 * E + 4 * 6) * 4),
        # batch_norm eval, E = 96: 3·C + 4·E + 2·E; bytes 2·E + C weight
        ("aten::native_batch_norm_backward", 1, True): (3 * 6 + 6 * 96, (2 * 96 + 6) * 4),
        # layer_norm without weight and bias, C = 16: 9·E; 3·E + C invstd
        ("aten::native_layer_norm_backward", 2, False): (9 * E, (3 * E + 16) * 4),
        ("aten::native_layer_norm_backward", 2, True): (9 * E, (3 * E + 4 * 16) * 4),
        # input needs no gradient, E = 288: 4·E; 2·E read and 4·C
        ("aten::native_layer_norm_backward", 3, True): (4 * 288, (2 * 288 + 4 * 16) * 4),
        # group_norm, C = 6 ÷ 3 groups
        ("aten::native_group_norm_backward", 2, True): (9 * E, (3 * E + 4 * 2) * 4),
    }
    assert ours.keys() == expected.keys()
    for key, (flops, nbytes) in expected.items():
        row = ours[key]
        assert (row["flops"], row["bytes"], row["calls"]) == (flops, nbytes, 1), (key, row["flops"], row["bytes"])
        assert row["owns_flops"] and row["family"] == key[0].split("_")[1] + "_norm", row
