"""Runs of one job made from a real trace by warping its time: each ProfilerStep of each rank stretched by a factor
of the test's choosing, so that a run is slower, on one rank or all, by an amount known in advance.

The warp is a monotone map of the trace's clock, applied to every event's start and end: inside step k time runs
``factor_k`` times as fast, outside the steps it runs as recorded. Nesting, order, flows and the kernels' places on
their streams stay as the profiler wrote them; only durations and gaps inside the steps change, as on a slower
machine. The template is the shared 2-rank NCCL job's rank 0 (``nccl_rank0_of_2``: 3 ProfilerSteps, all-reduce
kernels with their collective args); a rank of a made run is that trace with ``distributedInfo.rank`` set.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from tests.conftest import SHARED_TRACES

TEMPLATE = Path(SHARED_TRACES) / "nccl_rank0_of_2" / "rank-0.json.gz"
HOUR_NS = 3600 * 10**9


@cache
def _template_text() -> bytes:
    return gzip.decompress(TEMPLATE.read_bytes())


def template() -> dict[str, Any]:
    """A fresh copy of the template trace."""
    return json.loads(_template_text())


def step_ranges(trace: dict[str, Any]) -> list[tuple[float, float]]:
    """The trace's ProfilerStep ranges on the host, (start µs, end µs), in time order."""
    return sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in trace["traceEvents"]
                  if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X")


def warp(trace: dict[str, Any], factors: Sequence[float]) -> dict[str, Any]:
    """``trace`` with its k-th ProfilerStep running ``factors[k]`` times as long (in place; returned)."""
    steps = step_ranges(trace)
    assert len(factors) == len(steps), (factors, steps)

    def moved(t: float) -> float:
        return t + sum((f - 1) * min(max(t - start, 0.0), end - start) for (start, end), f in zip(steps, factors, strict=True))

    for event in trace["traceEvents"]:
        if "ts" not in event:
            continue
        start = float(event["ts"])
        event["ts"] = moved(start)
        if "dur" in event:
            event["dur"] = moved(start + float(event["dur"])) - event["ts"]
    return trace


def write_run(folder: Path, ranks: Sequence[Sequence[float]], *, hours_later: int,
              file_names: Sequence[str] | None = None) -> None:
    """A 2-rank (or ``len(ranks)``-rank) run of the template job in ``folder``, started ``hours_later`` hours after
    it: rank r's k-th step stretched by ``ranks[r][k]``; files named ``file_names[r]`` (default ``rank-<r>.json.gz``)."""
    folder.mkdir(parents=True)
    for rank, factors in enumerate(ranks):
        trace = warp(template(), factors)
        trace["baseTimeNanoseconds"] += hours_later * HOUR_NS
        trace["distributedInfo"] = {**trace["distributedInfo"], "rank": rank, "world_size": len(ranks)}
        name = file_names[rank] if file_names else f"rank-{rank}.json.gz"
        (folder / name).write_bytes(gzip.compress(json.dumps(trace).encode(), compresslevel=1))
