"""Communication figures worked out from a trace's raw events in Python, by the definitions the comm_by_group and
pipeline_stages headers state: an independent route to check the SQL against (time containment on each thread
instead of op trees, sorted sweeps instead of window functions)."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Ranges whose time on their thread is communication (gloo:send/recv are work lifetimes on the calling thread).
COMM_PREFIXES = ("c10d::", "_c10d_functional::", "nccl:", "gloo:")
P2P_RANGES = ("gloo:send", "gloo:recv")


@dataclass(frozen=True)
class Span:
    name: str
    cat: str
    tid: Any
    start: int  # absolute ns (the trace's base + ts)
    end: int
    args: dict[str, Any]


def load(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.name.endswith(".gz") else data)


def spans(trace: dict[str, Any]) -> list[Span]:
    """Every complete event of the trace, times in integer ns."""
    base = trace.get("baseTimeNanoseconds", 0)
    return [
        Span(e["name"], e.get("cat", ""), e.get("tid"), base + round(e["ts"] * 1000),
             base + round((e["ts"] + e["dur"]) * 1000), e.get("args", {}))
        for e in trace["traceEvents"]
        if e.get("ph") == "X"
    ]


def union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching intervals merged, sorted."""
    merged: list[list[int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def length(intervals: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in union(intervals))


def overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Time both unions cover."""
    total = 0
    for s1, e1 in union(a):
        for s2, e2 in union(b):
            total += max(0, min(e1, e2) - max(s1, s2))
    return total


def _is_comm(span: Span) -> bool:
    return span.name.startswith(COMM_PREFIXES) or span.name == "record_param_comms"


def _inside(outer: Span, inner: Span) -> bool:
    return outer.tid == inner.tid and outer.start <= inner.start and inner.end <= outer.end


def host_compute(events: list[Span]) -> list[tuple[int, int]]:
    """cpu_ops that neither are, hold nor sit inside communication on their thread (send/recv work ranges aside)."""
    comm = [s for s in events if _is_comm(s) and s.name not in P2P_RANGES]
    ops = [s for s in events if s.cat.lower() in ("cpu_op", "operator") and not _is_comm(s)]
    return [
        (op.start, op.end) for op in ops
        if not any(_inside(c, op) or _inside(op, c) for c in comm if c.tid == op.tid)
    ]


def containing(ranges: list[Span], tid: Any, t: int) -> list[Span]:
    return [r for r in ranges if r.tid == tid and r.start <= t < r.end]


def phase_of(events: list[Span], tid: Any, t: int) -> str:
    """optimizer under Optimizer.step#, backward under an evaluate_function range or on an autograd-only thread."""
    if containing([s for s in events if s.name.startswith("Optimizer.step#")], tid, t):
        return "optimizer"
    autograd = [s for s in events if s.name.startswith("autograd::engine::evaluate_function: ")]
    step_threads = {s.tid for s in events if s.name.startswith("ProfilerStep#")}
    if containing(autograd, tid, t) or (tid not in step_threads and any(a.tid == tid for a in autograd)):
        return "backward"
    return "forward"


def step_of(events: list[Span], t: int) -> int | None:
    for s in events:
        if s.name.startswith("ProfilerStep#") and s.start <= t < s.end:
            return int(s.name.removeprefix("ProfilerStep#"))
    return None


@dataclass(frozen=True)
class Instance:
    step: int
    phase: str
    name: str
    start: int
    end: int
    bytes: int
    issue_tid: Any
    issue_start: int
    peer: int | None  # send/recv: the peer's rank in its group
    shapes: Any  # the range's Input Dims


_ELEMENT_BYTES = {"float": 4, "double": 8, "long int": 8, "int": 4, "c10::half": 2, "c10::bfloat16": 2}


def gloo_instances(events: list[Span]) -> list[Instance]:
    """Each gloo range with the c10d call that issued it: the latest one started at or before it with the same
    tensor shapes (else the latest at all); a send/recv spans its call and its range."""
    calls = sorted((s for s in events if s.name.startswith("c10d::")), key=lambda s: s.start)
    found = []
    for r in (s for s in events if s.name.startswith("gloo:")):
        shapes = json.dumps(r.args.get("Input Dims"))
        before = [c for c in calls if c.start <= r.start]
        same = [c for c in before if json.dumps((c.args.get("Input Dims") or [None])[0]) == shapes]
        call = (same or before)[-1]
        start, end = (min(r.start, call.start), max(r.end, call.end)) if call.tid == r.tid else (r.start, r.end)
        size = sum(
            _product(dims) * _ELEMENT_BYTES[kind.lower()]
            for dims, kind in zip(r.args["Input Dims"], r.args["Input type"], strict=False)
        )
        name = r.name.removeprefix("gloo:")
        peer = int(call.args["Concrete Inputs"][2]) if name in ("send", "recv") else None
        step = step_of(events, call.start)
        if step is not None:
            found.append(Instance(step, phase_of(events, call.tid, call.start), name, start, end, size, call.tid,
                                  call.start, peer, r.args.get("Input Dims")))
    return found


def _product(dims: list[int]) -> int:
    result = 1
    for d in dims:
        result *= d
    return result


def clip(intervals: list[tuple[int, int]], window: tuple[int, int]) -> list[tuple[int, int]]:
    return [(max(s, window[0]), min(e, window[1])) for s, e in intervals if min(e, window[1]) > max(s, window[0])]


@dataclass(frozen=True)
class StageFigures:
    stage_first_op: str
    upstream: int | None
    sends: int
    compute: int
    send_recv: int
    wait: int
    step_ns: int


def pipeline_figures(traces: dict[int, list[Span]], step: int) -> dict[int, StageFigures]:
    """Per rank of a pipeline job: its sends/receives in ``step`` (peers are global ranks: the default group),
    the time it computes, is in sends/receives and waits in receives before the peer's matching send started, all
    within the step and outside computation."""
    p2p = {r: sorted((i for i in gloo_instances(ev) if i.step == step and i.name in ("send", "recv")),
                     key=lambda i: i.start) for r, ev in traces.items()}
    figures = {}
    for rank, events in traces.items():
        (window,) = [(s.start, s.end) for s in events if s.name == f"ProfilerStep#{step}"]
        compute = clip(host_compute(events), window)
        mine = p2p[rank]
        waits = []
        for peer in {i.peer for i in mine}:
            recvs = [i for i in mine if i.name == "recv" and i.peer == peer]
            sends = [i for i in p2p[peer] if i.name == "send" and i.peer == rank]
            waits += [(r.start, min(r.end, s.start)) for r, s in zip(recvs, sends, strict=False) if s.start > r.start]
        in_p2p = clip([(i.start, i.end) for i in mine], window)
        in_wait = clip(waits, window)
        first_recv = next((i for i in mine if i.name == "recv"), None)
        figures[rank] = StageFigures(
            mine[0].name, first_recv.peer if first_recv else None, sum(i.name == "send" for i in mine),
            length(compute), length(in_p2p) - overlap(in_p2p, compute), length(in_wait) - overlap(in_wait, compute),
            window[1] - window[0],
        )
    return figures
