"""Tolerant decoding of events that DuckDB's reader or orjson refused, so only bad events are lost.

The fast path hands a whole chunk to DuckDB, which fails it whole for one bad event. Such a chunk
comes here: Python's own JSON decoder reads it with every problem counted instead of fatal
(lone UTF-16 surrogate escapes, repeated keys, entries that are not objects, args DuckDB cannot
read), and the events are written back as a clean JSON array for the fast path to decode again.
Only where the text itself is broken is it split into events, and just the broken ones dropped.
``NaN``/``Infinity`` tokens are written back as they came: DuckDB reads them, and the checks of
:mod:`pipelines.checks` report them where they matter (``ts``, ``dur``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from pipelines.jsonstream import (
    COMPACT_BOUNDARY,
    KINETO_BOUNDARY,
    repair_surrogates,
    sanitize_utf8,
    tolerant_loads,
)

# args keys the tables read as an [x, y, z] array, or as a string holding one (tables._XYZ).
_XYZ_ARGS = ("grid", "block")


def _cut_at(body: bytes, commas: list[int]) -> list[bytes]:
    starts = [0, *(comma + 1 for comma in commas)]
    return [body[start:end] for start, end in zip(starts, [*commas, len(body)], strict=True)]


def _entries(piece: bytes, counts: Counter[str]) -> list[Any]:
    """The entries of ``piece`` (``{...}, 42, {...}``, read as an array), else of each of its
    ``}, {``-separated parts that decodes; a part that does not is counted as a malformed event."""
    try:
        entries: list[Any] = tolerant_loads(b"[" + piece + b"]", counts)
        return entries
    except ValueError:
        pass
    entries = []
    for part in _cut_at(piece, [m.end(1) for m in COMPACT_BOUNDARY.finditer(piece)]):
        try:
            entries += tolerant_loads(b"[" + part + b"]", counts)
        except ValueError:
            counts["malformed_event"] += 1
    return entries


def _decode_events(data: bytes, counts: Counter[str]) -> list[Any]:
    """The entries of the JSON array ``data``; where its text is broken, those of each event that decodes.

    Broken text is cut at libkineto's separator between events, which no event contains (see
    :mod:`pipelines.jsonstream`), then at ``}, {``, which a string might: that costs at most the
    events around it.
    """
    try:
        items = tolerant_loads(data, counts)
        return items if isinstance(items, list) else [items]
    except ValueError:
        pass
    body = data.strip()[1:-1]
    items = []
    for piece in _cut_at(body, [m.start() + 4 for m in re.finditer(re.escape(KINETO_BOUNDARY), body)]):
        items += _entries(piece, counts)
    return items


def _clear_bad_xyz(args: dict[str, Any], counts: Counter[str]) -> None:
    """Null a grid/block that is a string holding no JSON (which the kernels table cannot read)."""
    for key in _XYZ_ARGS:
        value = args.get(key)
        if isinstance(value, str):
            try:
                json.loads(value)
            except ValueError:
                args[key] = None
                counts["bad_arg"] += 1


def repair_events(data: bytes) -> tuple[bytes, Counter[str]]:
    """A clean JSON array of the events in ``data``, and what was wrong (quality code → count).

    Entries that are not objects and events whose text is broken are dropped; everything else is
    kept, with what could not be read set to null.
    """
    counts: Counter[str] = Counter()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        data, counts["invalid_utf8"] = sanitize_utf8(data)
    data, counts["invalid_surrogate"] = repair_surrogates(data)
    events = []
    for item in _decode_events(data, counts):
        if not isinstance(item, dict):
            counts["not_an_object"] += 1
            continue
        if isinstance(item.get("args"), dict):
            _clear_bad_xyz(item["args"], counts)
        events.append(item)
    text = json.dumps(events, ensure_ascii=False, separators=(",", ":"))  # NaN stays NaN, as DuckDB reads it
    return text.encode("utf-8"), +counts  # unary + drops the zero counts
