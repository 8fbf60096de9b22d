"""Build a large, realistic Kineto trace by repeating a real one end to end in time.

Copy ``k`` of the source's events is shifted by ``k * period`` µs (the source's profiling window
plus a gap), and its ids are offset by ``k`` times one more than their largest value, so
correlations, External ids, flows, ``Ev Idx`` and ``ProfilerStep#N`` stay consistent and unique
across copies. Events that describe the whole trace (``M`` metadata, the ``PyTorch Profiler``
span, the global ``i`` markers) are written once, after the copies, with the span and the window
end stretched over all of them. libkineto's pretty-printed layout is kept byte for byte, and the
output is streamed, so any size can be written in bounded memory.

    python bench/make_trace.py --size 500MB --out bench/out/traces/500MB/rank-0.json.gz
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import IO

import numpy as np
import orjson
from isal import igzip

DEFAULT_SOURCE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "nccl_rank0_of_2" / "rank-0.json.gz"
GAP_US = 1000
_BOUNDARY = b"\n  },\n  {"
_EVENTS_START = re.compile(rb'"traceEvents"\s*:\s*\[\n  \{')
_EVENTS_END = b"\n  }\n  ]"
# Integer fields shifted per copy; for a decimal ``ts`` only the integer µs part is matched.
_FIELD = re.compile(
    rb'("(?:ts|id|correlation|wait_on_cuda_event_record_corr_id|External id|external id|Ev Idx'
    rb'|Record function id|Sequence number|Python id|Python parent id)": |"ProfilerStep#)(\d+)'
)
# Keys that share one offset, so that the ids that join them still match after it.
_OFFSET_GROUP = {
    b"id": b"correlation",
    b"wait_on_cuda_event_record_corr_id": b"correlation",
    b"external id": b"External id",
    b"Python parent id": b"Python id",
}
_UNITS = {"KB": 10**3, "MB": 10**6, "GB": 10**9}


def parse_size(text: str) -> int:
    """``"500MB"`` -> bytes (decimal units, as MB/s are reported); a bare number is bytes."""
    text = text.strip().upper()
    for unit, scale in _UNITS.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * scale)
    return int(text)


def _is_whole_trace_event(event: bytes) -> bool:
    head = event.split(b'"args"', 1)[0]
    return (
        b'"ph": "M"' in head
        or b'"cat": "Trace"' in head
        or (b'"ph": "i"' in head and b'"s": "g"' in head)
    )


class _Template:
    """The source's repeated events, split into literal text and the integer fields to shift."""

    def __init__(self, events: list[bytes]) -> None:
        text = _BOUNDARY.join(events)
        pieces = _FIELD.split(text)  # [text, key, value, text, key, value, ..., text]
        self.parts = np.array(pieces, dtype=object)
        keys = pieces[1::3]
        values = np.array([int(v) for v in pieces[2::3]], dtype=np.int64)
        slots = np.arange(2, len(pieces), 3)
        names = [k.strip(b'": #') for k in keys]
        self.fields: list[tuple[np.ndarray, np.ndarray, bytes]] = []
        for name in sorted(set(names)):
            mask = np.array([n == name for n in names])
            self.fields.append((slots[mask], values[mask], _OFFSET_GROUP.get(name, name)))
        self.base = {g: 0 for *_, g in self.fields}
        for _, vals, group in self.fields:
            self.base[group] = max(self.base[group], int(vals.max()) + 1)
        # ProfilerStep#N: offset by the number of steps so step numbers continue.
        for _, vals, group in self.fields:
            if group == b"ProfilerStep":
                self.base[group] = int(vals.max() - vals.min() + 1)

    def render(self, copy: int, period_us: int) -> bytes:
        parts = self.parts.copy()
        for slots, vals, group in self.fields:
            shift = copy * (period_us if group == b"ts" else self.base[group])
            parts[slots] = (vals + shift).astype(bytes).astype(object)
        return b"".join(parts.tolist())


def _window(events: list[bytes]) -> tuple[float, float]:
    """The source's profiling window in µs: its ``PyTorch Profiler`` span, else the events' extent."""
    lo, hi = float("inf"), float("-inf")
    for event in events:
        if b'"cat": "Trace"' in event:
            span = orjson.loads(b"{" + event + b"}")
            return span["ts"], span["ts"] + span["dur"]
        decoded = orjson.loads(b"{" + event + b"}")
        if "ts" in decoded and decoded.get("ph") != "M":
            lo = min(lo, decoded["ts"])
            hi = max(hi, decoded["ts"] + decoded.get("dur", 0))
    return lo, hi


def _stretch(event: bytes, copies: int, period_us: int) -> bytes:
    """A whole-trace event rewritten to cover all copies."""
    if b'"cat": "Trace"' in event:
        dur = re.search(rb'"dur": ([\d.]+)', event)
        assert dur is not None
        stretched = float(dur.group(1)) + (copies - 1) * period_us
        return event.replace(dur.group(0), b'"dur": %.3f' % stretched)
    if b"Record Window End" in event:
        return re.sub(rb'("ts": )(\d+)', lambda m: m.group(1) + b"%d" % (int(m.group(2)) + (copies - 1) * period_us), event)
    return event


def write_trace(source: Path, out: IO[bytes], target_bytes: int) -> tuple[int, int]:
    """Write a trace of about ``target_bytes`` (uncompressed) to ``out``; return (copies, bytes)."""
    with igzip.open(source, "rb") if source.suffix == ".gz" else open(source, "rb") as f:
        text = f.read()
    start = _EVENTS_START.search(text)
    end = text.rindex(_EVENTS_END)
    assert start is not None, "source is not a pretty-printed Kineto trace"
    header, body, footer = text[: start.end()], text[start.end() : end], text[end:]
    events = body.split(_BOUNDARY)
    repeated = [e for e in events if not _is_whole_trace_event(e)]
    once = [e for e in events if _is_whole_trace_event(e)]
    lo, hi = _window(events)
    period_us = int(hi - lo) + 1 + GAP_US
    template = _Template(repeated)
    copy_bytes = len(template.render(0, period_us)) + len(_BOUNDARY)
    fixed = len(header) + len(footer) + sum(len(e) + len(_BOUNDARY) for e in once)
    copies = max(1, round((target_bytes - fixed) / copy_bytes))
    written = out.write(header)
    for k in range(copies):
        written += out.write(template.render(k, period_us))
        if k < copies - 1 or once:
            written += out.write(_BOUNDARY)
    written += out.write(_BOUNDARY.join(_stretch(e, copies, period_us) for e in once))
    written += out.write(footer)
    return copies, written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--size", required=True, help="target uncompressed size, e.g. 100MB, 234MB, 2GB")
    parser.add_argument("--out", type=Path, required=True, help="*.json.gz for gzip, *.json for plain")
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".part")
    with igzip.open(tmp, "wb", compresslevel=1) if args.out.suffix == ".gz" else open(tmp, "wb") as out:
        copies, written = write_trace(args.source, out, parse_size(args.size))
    tmp.rename(args.out)
    print(f"{args.out}: {copies} copies of {args.source.name}, {written / 1e6:.0f} MB uncompressed", file=sys.stderr)


if __name__ == "__main__":
    main()
