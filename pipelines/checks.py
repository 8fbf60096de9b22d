"""What the parser reports about bad events: the quality codes, and the SQL that finds them.

Every code below is one row of ``quality_issues`` per trace, with the number of events (or JSON
objects, for ``duplicate_key``) it concerns. An ``error`` means events were lost; a ``warning``
means the event was kept, with what could not be read set to null.

| code | severity | meaning |
|---|---|---|
| ``not_an_object`` | error | an entry of ``traceEvents`` is a number, string, ``null`` or list: dropped |
| ``malformed_event`` | error | an event's text is not JSON (and not one of the cases below): dropped |
| ``oversized_event`` | error | an event's text is longer than ``ParseSettings.max_event_bytes`` (16 MiB): dropped as it is read, never held whole |
| ``deeply_nested_event`` | error | an event nests more than ``jsonstream.MAX_EVENT_DEPTH`` (500) levels of objects and lists: dropped before it is decoded |
| ``duplicate_key`` | warning | a JSON object repeats a key: the last value is kept |
| ``invalid_surrogate`` | warning | a ``\\ud800``-style escape without its pair: replaced by U+FFFD |
| ``nan_token`` | warning | ``ts``/``dur`` is ``NaN`` or ``Infinity`` (not JSON): null |
| ``bad_number`` | warning | ``ts``/``dur`` is a number of 2^62 ns (4.6e15 µs) or more (``1e30``, 30 digits): null |
| ``bad_type`` | warning | ``ts``/``dur`` is a string, boolean, list or object: null |
| ``bad_arg`` | warning | ``args.grid``/``args.block`` is a string holding no JSON: null |
| ``missing_ph`` | warning | an event has no ``ph``: kept in ``other_events`` |
| ``missing_ts`` | warning | an event of a timed phase (any but ``M``) has no ``ts`` |
| ``missing_dur`` | warning | a complete (``X``) event has no ``dur`` |
| ``negative_ts`` / ``negative_dur`` | warning | ``ts`` / ``dur`` below zero, kept as written |
| ``negative_bytes`` | warning | a ``[memory]`` event's ``Total Allocated``/``Total Reserved`` is below zero (a negative ``Bytes`` is a free, and fine) |
| ``overlapping_events`` | warning | a complete (``X``) event starts inside another on its thread or stream and ends after it: kept as written; Perfetto drops it |
| ``no_device_activity`` | warning | kernel launches (``cudaLaunchKernel``, ``hipLaunchKernel``, graph launches, ...) recorded but no device events (kernel, memcpy, memset): the profiler saw no GPU activity (CUPTI/roctracer activity not recorded); the count is the launches |
| ``degenerate_external_ids`` | warning | every runtime call's ``External id`` equals its correlation id (PyTorch ~1.13): it names no op, so GPU activities are linked to ops by the launch's time and thread (``int_launch_ops``); the count is the calls |
| ``memory_totals_missing`` | warning | a ``[memory]`` event has no ``Total Allocated`` or ``Total Reserved`` (the 2021 format): no allocator curve, only the change since the trace began |

``NaN`` in ``args`` is read as DuckDB reads it (NaN for a DOUBLE key, null for an integer one),
unreported.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

CODES: dict[str, tuple[str, str]] = {
    "not_an_object": ("error", "entries of traceEvents are not JSON objects (a number, string, null or list): dropped"),
    "malformed_event": ("error", "events are not valid JSON: dropped"),
    "oversized_event": ("error", "events are larger than max_event_bytes: dropped unread"),
    "deeply_nested_event": ("error", "events nest objects and lists deeper than MAX_EVENT_DEPTH: dropped undecoded"),
    "duplicate_key": ("warning", "JSON objects repeat a key: the last value was kept"),
    "invalid_surrogate": ("warning", "lone UTF-16 surrogate escapes were replaced by U+FFFD"),
    "invalid_utf8": ("error", "invalid UTF-8 byte sequences were replaced by U+FFFD"),
    "nan_token": ("warning", "events have a ts or dur of NaN or Infinity (not JSON): read as null"),
    "bad_number": ("warning", "events have a ts or dur of 4.6e15 µs or more: read as null"),
    "bad_type": ("warning", "events have a ts or dur that is not a number: read as null"),
    "bad_arg": ("warning", "events have an args.grid or args.block string that holds no JSON: read as null"),
    "missing_ph": ("warning", "events have no ph: kept in other_events"),
    "missing_ts": ("warning", "events have no ts"),
    "missing_dur": ("warning", "complete (X) events have no dur"),
    "negative_ts": ("warning", "events have a negative ts"),
    "negative_dur": ("warning", "events have a negative dur"),
    "negative_bytes": ("warning", "[memory] events have a negative Total Allocated or Total Reserved"),
    "overlapping_events": (
        "warning",
        (
            "complete (X) events start inside another event of their thread or stream and end after it (not"
            " nested): kept as written; Perfetto's trace viewer drops them"
        ),
    ),
    "no_device_activity": (
        "warning",
        (
            "kernel launches recorded but no device events: the profiler saw no GPU activity (CUDA/HIP activity"
            " was not recorded), so device time, GPU utilization and kernel tables are empty, not zero"
        ),
    ),
    "degenerate_external_ids": (
        "warning",
        (
            "runtime calls carry their correlation id as External id (PyTorch ~1.13): it names no op, so GPU"
            " activities were linked to ops by the launch's time and thread, as HTA links them"
        ),
    ),
    "memory_totals_missing": (
        "warning",
        (
            "[memory] events have no Total Allocated or Total Reserved (the 2021 format): memory_timeline and"
            " memory_peaks give net_allocated_bytes, the change since the trace began, and no allocator totals"
        ),
    ),
}

DROPPED_CODES = frozenset(code for code, (severity, _) in CODES.items() if severity == "error") - {"invalid_utf8"}
"""Codes that mean events of the trace were lost."""

# Per code: the condition, over ``chunk`` (pipelines.parse), that an event has that problem.
# ``bad_ts``/``bad_dur`` hold the text of a ts/dur that did not read as a time, else null.
CHUNK_CHECKS: dict[str, str] = {
    "bad_time": "bad_ts is not null or bad_dur is not null",
    "missing_ph": "ph is null",
    "missing_ts": "ts_ns is null and bad_ts is null and ph <> 'M'",
    "missing_dur": "ph = 'X' and dur_ns is null and bad_dur is null",
    "negative_ts": "ts_ns < 0",
    "negative_dur": "dur_ns < 0",
}
BAD_TIMES = "select bad_ts, bad_dur from chunk where bad_ts is not null or bad_dur is not null"

# Per code: the condition, over the ``memory_events`` table's file, that an event has that problem.
MEMORY_CHECKS: dict[str, str] = {
    "negative_bytes": "total_allocated_bytes < 0 or total_reserved_bytes < 0",
    "memory_totals_missing": "total_allocated_bytes is null or total_reserved_bytes is null",
}

LAUNCH_CHECKS = (
    "select count(*) filter (where regexp_matches(name, '(Launch.*Kernel|GraphLaunch)')"
    " or starts_with(name, 'runFunction')),"
    " if(bool_and(external_id = correlation) filter (where correlation is not null and external_id is not null),"
    " count(*) filter (where correlation is not null and external_id is not null), 0)"
    " from {runtime_calls}"
)
"""Over the ``runtime_calls`` table's file: the kernel launches (``no_device_activity`` where the trace has no device
events), and the calls with both ids where every one has them equal (``degenerate_external_ids``)."""


SPANS = (
    "select hash(pid, tid) as track, ts_ns as start, ts_ns + dur_ns as end from ({events})"
    " where ts_ns is not null and dur_ns > 0 order by track, start, \"end\" desc"
)
"""Over ``events``, the union of the complete events' ``pid, tid, ts_ns, dur_ns``: the spans
:func:`overlapping_events` checks, each on its track (thread or stream), in the order it walks them."""
SPAN_BATCH_ROWS = 1 << 20
"""Spans :func:`overlapping_events` holds at once (24 MiB, and a few times that while it checks them)."""


class _OpenSpans(NamedTuple):
    """Perfetto's stack of one track's open events (outermost first): those that later events may nest in."""

    start: np.ndarray
    end: np.ndarray


_NONE_OPEN = _OpenSpans(np.empty(0, np.int64), np.empty(0, np.int64))


def overlapping_events(batches: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> int:
    """How many events (of positive duration) a trace viewer drops, over ``(track, start, end)`` batches in
    :data:`SPANS` order (by track, start, the longer first): each event must end within the innermost event still
    open at its start, or it overlaps that event without nesting in it and is dropped, as Perfetto's slice tracker
    does.

    One batch is held at a time, with its track's events still open before it: a trace of any size is checked in
    bounded memory. Most batches nest properly, which :func:`_nests` checks with sorts and binary searches; only
    the others are walked one event at a time.
    """
    dropped = 0
    track, open_spans = None, _NONE_OPEN
    for tracks, start, end in batches:
        for rows in np.split(np.arange(len(tracks)), np.flatnonzero(np.diff(tracks)) + 1):
            if not len(rows):
                continue
            if tracks[rows[0]] != track:
                track, open_spans = tracks[rows[0]], _NONE_OPEN
            count, open_spans = _walk(open_spans, start[rows], end[rows])
            dropped += count
    return dropped


def _walk(open_spans: _OpenSpans, start: np.ndarray, end: np.ndarray) -> tuple[int, _OpenSpans]:
    """The events of one track's batch (in :data:`SPANS` order) that the viewer drops, given the events open before
    them, and the events open after them."""
    starts, ends = np.concatenate([open_spans.start, start]), np.concatenate([open_spans.end, end])
    if _nests(starts, ends):  # none dropped; those still open at the last start stay open, outermost first
        still_open = ends > start[-1]
        return 0, _OpenSpans(starts[still_open], ends[still_open])
    return _dropped_by_viewer(open_spans, start, end)


def _nests(start: np.ndarray, end: np.ndarray) -> bool:
    """Whether one track's events all nest: sweeping starts and ends in time order (at one instant ends before
    starts, the inner event inside the outer), an event that nests has as many events open just before its end as
    just after its start. The earliest event of any overlap has more: the event overlapping it is still open."""
    count = len(start)
    position = np.arange(count)
    by_start = np.argsort(start, kind="stable")
    if (np.diff(start[by_start]) == 0).any():  # the longer first; identical events in index order
        by_start = np.lexsort((position, start - end, start))
    by_end = np.argsort(end, kind="stable")
    if (np.diff(end[by_end]) == 0).any():  # the shorter first; identical events in reverse index order
        by_end = np.lexsort((-position, end - start, end))
    starts, ends = start[by_start], end[by_end]
    open_after_start = np.empty(count, np.int64)
    open_after_start[by_start] = position + 1 - np.searchsorted(ends, starts, "right")
    open_before_end = np.empty(count, np.int64)
    open_before_end[by_end] = np.searchsorted(starts, ends, "left") - position
    return bool((open_after_start == open_before_end).all())


def _dropped_by_viewer(open_spans: _OpenSpans, start: np.ndarray, end: np.ndarray) -> tuple[int, _OpenSpans]:
    """Perfetto's slice tracker over one track's batch (in :data:`SPANS` order) from the events open before it: the
    events it drops, and those open after it."""
    dropped = 0
    stack = list(zip(open_spans.start.tolist(), open_spans.end.tolist(), strict=True))  # innermost last
    for begin, finish in zip(start.tolist(), end.tolist(), strict=True):
        while stack and stack[-1][1] <= begin:
            stack.pop()
        if stack and stack[-1][1] < finish:
            dropped += 1
        else:
            stack.append((begin, finish))
    starts, ends = zip(*stack, strict=True) if stack else ((), ())
    return dropped, _OpenSpans(np.array(starts, np.int64), np.array(ends, np.int64))


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_NON_FINITE = {"nan", "inf", "infinity"}


def time_code(text: str) -> str:
    """Why a ts/dur ``text`` did not read as a time: ``nan_token``, ``bad_number`` or ``bad_type``."""
    if text.lower().lstrip("+-") in _NON_FINITE:
        return "nan_token"
    return "bad_number" if _NUMBER.fullmatch(text.strip()) else "bad_type"


def bad_time_counts(rows: list[tuple[str | None, str | None]]) -> tuple[Counter[str], dict[str, str]]:
    """Events per code among ``(bad_ts, bad_dur)`` rows, and one example of each code (``ts='abc'``)."""
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for row in rows:
        codes: dict[str, str] = {}
        for field, text in zip(("ts", "dur"), row, strict=True):
            if text is not None:
                codes.setdefault(time_code(text), f"{field}={text[:40]!r}")
        for code, example in codes.items():
            counts[code] += 1
            examples.setdefault(code, example)
    return counts, examples


def message(code: str, count: int, example: str | None = None) -> str:
    """The quality issue's message: how many, what, and an example where there is one."""
    text = f"{count} {CODES[code][1]}"
    return f"{text} (e.g. {example})" if example else text
