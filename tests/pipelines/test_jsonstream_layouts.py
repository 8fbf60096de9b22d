"""Any JSON layout of a trace parses into the tables of the trace as written, and an event (or run of
top-level keys) over the size cap is dropped as it is read, never held whole.

libkineto's pretty-printed layout is cut at its separator between events; every other layout (compact
one-line JSON, other indents, ``\\r\\n``, several events per line, ``traceEvents`` first or last) goes
through the scanner. Small chunks make each trace cross many chunk boundaries.
"""

from __future__ import annotations

import gzip
import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from pipelines.jsonstream import EventChunker
from pipelines.parse import ParsedTrace, ParseSettings
from tests.support.parsed import parse_file, table_differences

TRACES = [
    "rocm_mi250/mi250_minitoy_train_ROCm6_2_kineto.json.gz",  # libkineto's layout, 220 events
    "simple_add/alexnet_trace.json.gz",  # libkineto's layout, distributedInfo and deviceProperties
    "edge_cases/tiny_base.json.gz",  # compact one-line JSON
]
SMALL_CHUNKS = ParseSettings(chunk_bytes=8 << 10)


def _events_per_line(document: dict[str, Any]) -> bytes:
    """Three compact events to a line, the other keys around them as orjson writes them."""
    events = document["traceEvents"]
    lines = [b", ".join(orjson.dumps(e) for e in events[i : i + 3]) for i in range(0, len(events), 3)]
    keys = orjson.dumps({k: v for k, v in document.items() if k != "traceEvents"})
    return keys[:-1] + b', "traceEvents": [\n' + b",\n".join(lines) + b"\n]}"


def _key_order(first: bool) -> Callable[[dict[str, Any]], bytes]:
    def dump(document: dict[str, Any]) -> bytes:
        others = [(k, v) for k, v in document.items() if k != "traceEvents"]
        events = [("traceEvents", document["traceEvents"])]
        return orjson.dumps(dict(events + others if first else others + events))

    return dump


LAYOUTS: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "compact": orjson.dumps,
    "indent_1_crlf": lambda d: json.dumps(d, indent=1).replace("\n", "\r\n").encode(),  # \u escapes too
    "tabs": lambda d: json.dumps(d, indent="\t", ensure_ascii=False).encode(),
    "events_per_line": _events_per_line,
    "events_first": _key_order(first=True),
    "events_last": _key_order(first=False),
}


def _issues(parsed: ParsedTrace) -> list[tuple[str, int]]:
    return sorted((i.code, i.count) for i in parsed.issues)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", TRACES)
def test_every_layout_gives_the_tables_of_the_trace_as_written(
    name: str, layout: str, shared_traces: Path, tmp_path: Path
) -> None:
    text = gzip.decompress((shared_traces / name).read_bytes())
    written = tmp_path / "written.json"
    written.write_bytes(text)
    relaid = tmp_path / "relaid.json"
    relaid.write_bytes(LAYOUTS[layout](json.loads(text)))

    expected = parse_file(written, tmp_path / "written")
    parsed = parse_file(relaid, tmp_path / "relaid", SMALL_CHUNKS)

    assert parsed.event_count == expected.event_count > 0
    assert (parsed.rank, parsed.base_time_ns, parsed.distributed) == (expected.rank, expected.base_time_ns, expected.distributed)
    assert _issues(parsed) == _issues(expected)
    assert table_differences(parsed, expected) == {}


CAP = 64 << 10
BIG_EVENT = orjson.dumps({"ph": "X", "cat": "cpu_op", "name": "x" * (3 * CAP), "pid": 1, "tid": 1, "ts": 1, "dur": 1})


def _with_big_event(text: bytes, layout: str, where: str) -> bytes:
    """``text`` (libkineto's layout) with BIG_EVENT first, in the middle or last among its events."""
    if layout == "compact":
        document = json.loads(text)
        events = document["traceEvents"]
        events.insert({"first": 0, "middle": len(events) // 2, "last": len(events)}[where], json.loads(BIG_EVENT))
        return orjson.dumps(document)
    if where == "first":
        start = text.index(b'"traceEvents": [') + len(b'"traceEvents": [')
        return text[:start] + b"\n  " + BIG_EVENT + b"," + text[start:]
    if where == "middle":
        cut = text.find(b"\n  },\n  {", len(text) // 2) + len(b"\n  },")
        return text[:cut] + b"\n  " + BIG_EVENT + b"," + text[cut:]
    end = text.rindex(b"\n  }\n  ]") + len(b"\n  }")
    return text[:end] + b",\n  " + BIG_EVENT + text[end:]


@pytest.mark.parametrize("chunk_bytes", [16 << 10, 1 << 20], ids=["chunks_under_cap", "chunks_over_cap"])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("layout", ["pretty", "compact"])
def test_an_event_over_the_cap_is_an_issue_and_the_others_land(
    layout: str, where: str, chunk_bytes: int, shared_traces: Path, tmp_path: Path
) -> None:
    text = gzip.decompress((shared_traces / TRACES[0]).read_bytes())
    clean, bad = tmp_path / "clean.json", tmp_path / "bad.json"
    clean.write_bytes(text)
    bad.write_bytes(_with_big_event(text, layout, where))
    settings = ParseSettings(chunk_bytes=chunk_bytes, max_event_bytes=CAP)

    expected = parse_file(clean, tmp_path / "clean", settings)
    parsed = parse_file(bad, tmp_path / "bad", settings)

    assert _issues(parsed) == sorted([*_issues(expected), ("oversized_event", 1)])
    assert next(i for i in parsed.issues if i.code == "oversized_event").severity == "error"
    assert parsed.event_count == expected.event_count
    assert table_differences(parsed, expected) == {}


def _chunk(path: Path, cap: int) -> tuple[list[Any], EventChunker, int]:
    """The events of each chunk, the chunker, and the peak of memory traced while it ran."""
    tracemalloc.start()
    try:
        with open(path, "rb") as raw:
            chunker = EventChunker(raw, chunk_bytes=64 << 10, max_event_bytes=cap)
            events = [event for chunk in chunker for event in orjson.loads(chunk)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return events, chunker, peak


RUN = 128 << 20  # far beyond the cap and the chunks
# A read block (8 MiB), the cap, the scanner's temporaries: well under RUN, and independent of it.
HELD_BOUND = 40 << 20


def test_an_unterminated_string_is_read_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    with open(path, "wb") as out:
        out.write(b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "kept", "ts": 1, "dur": 2}, {"name": "')
        out.write(b"a" * RUN)

    events, chunker, peak = _chunk(path, cap=1 << 20)

    assert events == [{"ph": "X", "name": "kept", "ts": 1, "dur": 2}]
    assert [p.code for p in chunker.envelope.problems] == ["truncated_json", "oversized_event"]
    assert chunker.envelope.metadata == {"schemaVersion": 1}
    assert peak < HELD_BOUND, peak >> 20


def test_keys_after_the_events_over_the_cap_are_an_issue_and_the_events_land(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    with open(path, "wb") as out:
        out.write(b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "kept", "ts": 1, "dur": 2}], "x": "')
        out.write(b"a" * RUN)
        out.write(b'"}')

    events, chunker, peak = _chunk(path, cap=1 << 20)

    assert events == [{"ph": "X", "name": "kept", "ts": 1, "dur": 2}]
    assert [p.code for p in chunker.envelope.problems] == ["oversized_metadata"]
    assert chunker.envelope.metadata == {"schemaVersion": 1}
    assert peak < HELD_BOUND, peak >> 20


def test_json_without_trace_events_in_its_first_cap_bytes_is_not_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    with open(path, "wb") as out:
        out.write(b'{"nodes": "' + b"a" * RUN + b'", "traceEvents": []}')

    events, chunker, peak = _chunk(path, cap=1 << 20)

    assert events == []
    assert [p.code for p in chunker.envelope.problems] == ["not_a_kineto_trace"]
    assert peak < HELD_BOUND, peak >> 20
