"""Cut a Kineto trace stream into JSON arrays of whole events, and recover its top-level keys.

libkineto pretty-prints every event as a block that starts with ``"  {"`` at two spaces of indent,
so ``"\\n  },\\n  {"`` only ever separates two top-level events: a raw newline cannot occur inside
a JSON string and nested objects are indented deeper. Cutting there is the fast path: a search for
a fixed string, no scan of the events. Any other layout (compact one-line JSON, other indents,
several events per line) has no such separator; from the first stretch of ``chunk_bytes`` without
one, :class:`pipelines.jsonscan.ArrayScanner` finds where events end instead. Either way memory
holds a chunk or so, whatever the trace's size, and an event over the size cap is dropped as it is
read rather than held whole. An event nesting deeper than ``MAX_EVENT_DEPTH`` is dropped before
DuckDB sees it: each libkineto chunk is measured (:func:`pipelines.jsonscan.max_depth`), and one that
holds such an event goes to the scanner, which finds the events to drop.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import Counter
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import orjson
from isal import isal_zlib

from pipelines.checks import CODES, message
from pipelines.jsonscan import ArrayScanner, max_depth
from pipelines.storage import is_transient

EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
KINETO_BOUNDARY = b"\n  },\n  {"
_KINETO_EVENTS_END = b"\n  }\n  ]"
COMPACT_BOUNDARY = re.compile(rb"\}(\s*),\s*\{")  # group 1 ends where the comma is
_SEPARATOR = re.compile(rb"\s*,?")  # after an event: up to where the next one starts
_LEADING_SEPARATOR = re.compile(rb"\s*,")
_NO_EVENTS = re.compile(rb"[\s,]*")
MAX_EVENT_BYTES = 16 << 20
# The deepest an event may nest (the event is level 1, its args 2): DuckDB's JSON reader crashed the process on
# 200,000 levels, and the repair path decodes with Python's json, whose recursion limit is 1,000 calls in all.
# Real traces nest 6 deep.
MAX_EVENT_DEPTH = 500
# An escaped backslash (kept, so that ``\\ud800`` is not read as an escape), a valid surrogate
# pair (kept), or a lone surrogate escape (group 1: replaced).
_SURROGATE_ESCAPE = re.compile(
    rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})"
)
_READ_BLOCK = 8 << 20
# isal's stubs do not declare its error an exception class; it is one (zlib.error's counterpart).
_ISAL_ERROR: type[Exception] = isal_zlib.error  # type: ignore[assignment]
_STREAM_ERRORS = (OSError, EOFError, ValueError, zlib.error, _ISAL_ERROR)


def _match_end(pattern: re.Pattern[bytes], data: bytes | bytearray, start: int, end: int | None = None) -> int:
    """Where ``pattern``, which matches at ``start`` by construction (a separator just scanned, optional text), ends."""
    found = pattern.match(data, start, len(data) if end is None else end)
    if found is None:
        raise AssertionError(f"{pattern.pattern!r} does not match at {start}")
    return found.end()


@dataclass(frozen=True)
class StreamProblem:
    """Something wrong with a trace file, found while reading it."""

    code: str
    message: str
    severity: str = "error"
    count: int = 1


@dataclass
class TraceEnvelope:
    """What surrounds the events: top-level keys, problems met, and bytes read."""

    metadata: dict[str, Any] = field(default_factory=dict)
    problems: list[StreamProblem] = field(default_factory=list)
    bytes_read: int = 0
    has_events_key: bool = False


class GzipStream:
    """Incremental gzip inflate (isal) that hands out everything decoded before a corrupt byte.

    A file reader would raise on a damaged block and lose the whole read; here the data inflated
    so far is returned first and the error is raised on the next read. Concatenated members are
    read one after another, as gzip does.
    """

    _FEED = 1 << 20

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._inflater = isal_zlib.decompressobj(wbits=31)
        self._in_member = False  # the current inflater has been fed part of a member
        self._pending: Exception | None = None
        self._finished = False

    def read(self, size: int) -> bytes:
        """Up to ``size`` inflated bytes, ``b""`` at the end. One inflate call's output is handed
        out as it is (short reads are allowed): gathering blocks into ``size`` would copy each
        byte twice more, which cost as much as the inflating."""
        while True:
            if self._pending is not None:
                error, self._pending = self._pending, None
                raise error
            if self._finished:
                return b""
            out = b""
            feed = self._inflater.unconsumed_tail or self._raw.read(self._FEED)
            try:
                if not feed:  # input exhausted: drain what the inflater still holds
                    out = self._inflater.decompress(b"", size)
                    if not out:
                        self._finished = True
                        if self._in_member and not self._inflater.eof:
                            self._pending = EOFError("gzip stream ends before its end-of-stream marker")
                else:
                    out = self._inflater.decompress(feed, size)
                    self._in_member = True
                if self._inflater.eof:
                    rest = self._inflater.unused_data.lstrip(b"\x00")
                    self._inflater = isal_zlib.decompressobj(wbits=31)
                    self._in_member = bool(rest)
                    if rest:
                        out += self._inflater.decompress(rest, max(size - len(out), 1))
            except _ISAL_ERROR as exc:
                self._pending, self._finished = exc, True
            if out:
                return out


def open_decompressed(raw: IO[bytes]) -> IO[bytes] | GzipStream:
    """Wrap ``raw`` in a gzip decoder when it starts with the gzip magic bytes, whatever its name."""
    head = raw.read(2)
    raw.seek(0)
    return GzipStream(raw) if head == b"\x1f\x8b" else raw


def sanitize_utf8(data: bytes) -> tuple[bytes, int]:
    """Return ``data`` with invalid UTF-8 replaced by U+FFFD, and how many replacements were made."""
    text = data.decode("utf-8", errors="replace")
    replaced = text.count("\ufffd") - data.decode("utf-8", errors="ignore").count("\ufffd")
    return text.encode("utf-8"), replaced


def repair_surrogates(data: bytes) -> tuple[bytes, int]:
    """``data`` with each lone UTF-16 surrogate escape replaced by ``\\ufffd``, and how many there were."""
    count = 0

    def replace(match: re.Match[bytes]) -> bytes:
        nonlocal count
        if match.group(1) is None:
            return match.group(0)
        count += 1
        return b"\\ufffd"

    if b"\\u" not in data:
        return data, 0
    return _SURROGATE_ESCAPE.sub(replace, data), count


def tolerant_loads(data: bytes, counts: Counter[str]) -> Any:
    """Decode JSON that may repeat keys or hold ``NaN``, counting repeated keys into ``counts``.

    Raises:
        ValueError: when ``data`` is not JSON even so.
    """

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)  # the last value of a repeated key wins, as in orjson
        if len(obj) != len(items):
            counts["duplicate_key"] += 1
        return obj

    return json.loads(data, object_pairs_hook=pairs)


def _decodes(data: bytes | bytearray) -> bool:
    """Whether ``data`` is JSON, invalid UTF-8 aside (that is repaired where the events are decoded)."""
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            orjson.loads(sanitize_utf8(bytes(data))[0])
        except orjson.JSONDecodeError:
            return False
    return True


class EventChunker:
    """Iterate over JSON-array chunks of whole events; ``envelope`` is complete once iteration ends.

    Memory holds about ``chunk_bytes`` (or ``max_event_bytes``, the larger) plus a read block,
    whatever the trace's size or layout: the keys before and after the events are read up to
    ``max_event_bytes`` each, and an event larger than that is dropped as it is read
    (``oversized_event``), never held whole.

    Args:
        stream: decompressed trace bytes.
        chunk_bytes: target chunk size; a chunk is cut at the last event boundary past this size.
        max_event_bytes: the largest event (and the largest run of top-level keys) that is read.
    """

    def __init__(
        self, stream: IO[bytes] | GzipStream, *, chunk_bytes: int, max_event_bytes: int = MAX_EVENT_BYTES
    ) -> None:
        self._stream = stream
        self._chunk_bytes = chunk_bytes
        self._max_event_bytes = max_event_bytes
        self._header = b""
        self._events = bytearray()  # events read but not yet handed out, after an opening "["
        self._dropped: Counter[str] = Counter()  # oversized_event, deeply_nested_event
        self.envelope = TraceEnvelope()

    def _read(self) -> bytes:
        """Next block of bytes; ``b""`` at the end or when the stream breaks (recorded as a problem)."""
        try:
            block = self._stream.read(_READ_BLOCK)
        except EOFError:
            self._problem("truncated_gzip", "gzip stream ends before its end-of-stream marker")
            return b""
        except _STREAM_ERRORS as exc:
            if is_transient(exc):  # the store, not the data: the trace is read again or its run fails
                raise
            self._problem("corrupt_gzip", f"gzip data is corrupt ({exc})")
            return b""
        self.envelope.bytes_read += len(block)
        return block

    def _problem(self, code: str, message: str, severity: str = "error") -> None:
        self.envelope.problems.append(StreamProblem(code, message, severity))

    def __iter__(self) -> Iterator[bytearray]:
        if not self._find_events():
            return
        keys = yield from self._kineto_chunks()
        if keys is None:
            keys = yield from self._scanned_chunks()
        self._decode_metadata(keys)
        limits = {"oversized_event": f"max_event_bytes = {self._max_event_bytes}",
                  "deeply_nested_event": f"MAX_EVENT_DEPTH = {MAX_EVENT_DEPTH}"}
        for code, count in (+self._dropped).items():  # unary + drops the zero counts
            text = f"{message(code, count)} ({limits[code]})"
            self.envelope.problems.append(StreamProblem(code, text, CODES[code][0], count))

    def _find_events(self) -> bool:
        """Read up to the opening of the ``traceEvents`` array; False, with the problem recorded, if it
        is not there (or not within ``max_event_bytes``)."""
        buf = bytearray()
        match = None
        while match is None:
            if len(buf) > self._max_event_bytes:
                self._problem(
                    "not_a_kineto_trace",
                    f"no traceEvents key in its first {len(buf)} bytes (max_event_bytes before the events)",
                )
                return False
            block = self._read()
            if not block:
                self._without_events_key(bytes(buf))
                return False
            search_from = max(0, len(buf) - 32)
            buf += block
            match = EVENTS_KEY.search(buf, search_from)
        self.envelope.has_events_key = True
        self._header = bytes(buf[: match.start()])
        buf[: match.end()] = b"["  # the events read so far, behind the opening of their JSON array
        self._events = buf
        return True

    def _kineto_chunks(self) -> Generator[bytearray, None, bytearray | None]:
        """Chunks cut at libkineto's separator, while the trace is in its layout.

        Returns the keys that follow the events array once the stream is read whole this way; None to
        go on with the scanner: at a stretch of ``chunk_bytes`` without a separator (another layout),
        an event over the size or depth cap, or an end that is not libkineto's (a truncated or damaged
        trace).
        """
        while block := self._read():
            self._events += block
            if len(self._events) >= self._chunk_bytes:
                cut = self._events.rfind(KINETO_BOUNDARY)
                if cut < 0 or not self._kineto_events_fit(cut):
                    return None
                yield self._take_events(cut + 4, cut + len(KINETO_BOUNDARY) - 1)
        end = self._events.rfind(_KINETO_EVENTS_END)
        if end < 0 or self._stream_broken() or not self._kineto_events_fit(end):
            return None
        keys = self._read_keys(end + len(_KINETO_EVENTS_END))
        yield self._take_events(end + 4, len(self._events))
        return keys

    def _kineto_events_fit(self, end: int) -> bool:
        """Whether the events before ``end`` are within the caps: a separator in every stretch as long as the
        size cap, and no bracket deeper than the depth cap (the buffer's ``[`` is a level of its own; bytes past
        ``end``, the start of an event, are measured too: whole, that event will be again)."""
        start, stretch = 0, self._max_event_bytes + len(KINETO_BOUNDARY)
        while end - start > self._max_event_bytes:
            start = self._events.rfind(KINETO_BOUNDARY, start + 1, start + stretch)
            if start < 0:
                return False
        return max_depth(self._events) <= MAX_EVENT_DEPTH + 1

    def _scanned_chunks(self) -> Generator[bytearray, None, bytearray | None]:
        """Chunks cut where :class:`ArrayScanner` finds events end, from the buffered events on.

        Returns the keys that follow the events array, or None when the stream ends inside it
        (truncated) or they are over the cap.
        """
        scanner = ArrayScanner(MAX_EVENT_DEPTH)
        ends, close, deep = scanner.scan(self._events, 1)
        opened = 1  # where the event being read starts (with the separator before it)
        skipping = False  # the event being read is over the cap: dropped up to its end
        while True:
            ends, close = self._drop_events(ends, close, opened, deep)
            if ends.size:
                opened = int(ends[-1])
            if close >= 0:
                break
            if not skipping and len(self._events) - opened > self._max_event_bytes:
                del self._events[opened:]
                self._dropped["oversized_event"] += 1
                skipping = True
            elif len(self._events) >= self._chunk_bytes and opened > 1:
                yield self._take_events(opened, _match_end(_SEPARATOR, self._events, opened))
                opened = 1
            block = self._read()
            if not block:
                break
            if skipping:
                ends, close, deep = scanner.scan(block)
                resume = int(ends[0]) if ends.size else close
                if resume < 0:
                    continue
                ends, deep, skipping = ends[1:], deep[1:], False
                shift = len(self._events) - resume
                self._events += memoryview(block)[resume:]
                ends += shift
                close = close + shift if close >= 0 else -1
            else:
                shift = len(self._events)
                self._events += block
                ends, close, deep = scanner.scan(self._events, shift)
        keys = None
        if close >= 0:
            keys = self._read_keys(close + 1)
            del self._events[close:]
            last = len(self._events)
        else:  # the stream ended inside the events array: the last whole event ends at ``opened``
            last = opened
            self._truncated()
        if self._stream_broken():  # bytes inflated before the damage was found may be garbage
            last = self._salvage()
        if _match_end(_NO_EVENTS, self._events, 1, last) < last:
            yield self._take_events(last, len(self._events))
        return keys

    def _drop_events(
        self, ends: np.ndarray, close: int, opened: int, deep: np.ndarray
    ) -> tuple[np.ndarray, int]:
        """Delete the events over the size cap, or ``deep`` (over the depth cap), among those ``ends`` closes (each
        with the separator before it); the ends and close after them move back."""
        oversized = np.diff(ends, prepend=opened) > self._max_event_bytes
        dropped = np.flatnonzero(oversized | deep)
        for index in dropped[::-1]:
            start, stop = int(ends[index - 1]) if index else opened, int(ends[index])
            del self._events[start:stop]
            ends[index + 1 :] -= stop - start
            close = close - (stop - start) if close >= 0 else -1
        self._dropped["oversized_event"] += int(oversized.sum())
        self._dropped["deeply_nested_event"] += int((deep & ~oversized).sum())
        return (np.delete(ends, dropped) if dropped.size else ends), close

    def _take_events(self, end: int, rest: int) -> bytearray:
        """The buffered events before ``end``, closed into a JSON array; the buffer keeps those from ``rest``.

        The buffer itself is handed over, not copied, and it is returned rather than bound in the
        generator's frame (so ``yield`` it at once): it is freed as soon as its consumer lets go of it.
        """
        events = self._events
        with memoryview(events) as view:
            self._events = bytearray(b"[") + view[rest:]
        del events[end:]
        if separator := _LEADING_SEPARATOR.match(events, 1):  # an event dropped before the first one kept
            del events[1 : separator.end()]
        events += b"]"
        return events

    def _stream_broken(self) -> bool:
        return any(p.code in ("truncated_gzip", "corrupt_gzip") for p in self.envelope.problems)

    def _truncated(self) -> None:
        """Record that the JSON ends early, unless a broken gzip stream already says why."""
        if not self._stream_broken():
            where = self.envelope.bytes_read
            self._problem("truncated_json", f"JSON ends early or is malformed after byte {where}")

    def _salvage(self) -> int:
        """Where the longest run of whole buffered events that decodes ends (1: none does).

        Whether a run decodes is monotonic in its length (damage only ever ends it), so a binary
        search over where the events end needs O(log n) decodes of the (bounded) buffer.
        """
        if separator := _LEADING_SEPARATOR.match(self._events, 1):
            del self._events[1 : separator.end()]
        ends, _, _ = ArrayScanner().scan(self._events, 1)
        best, low, high = 1, 0, len(ends) - 1
        while low <= high:
            middle = (low + high) // 2
            if _decodes(self._events[: ends[middle]] + b"]"):
                best, low = int(ends[middle]), middle + 1
            else:
                high = middle - 1
        return best

    def _read_keys(self, start: int) -> bytearray | None:
        """What follows the events array, the buffer's from ``start`` on and the rest of the stream;
        None, with the problem recorded, when that is more than the cap."""
        keys = bytearray(memoryview(self._events)[start : start + self._max_event_bytes + 1])
        while len(keys) <= self._max_event_bytes and (block := self._read()):
            keys += block
        if len(keys) > self._max_event_bytes:
            self._problem(
                "oversized_metadata",
                f"the keys after traceEvents exceed max_event_bytes ({self._max_event_bytes}): not read",
            )
            return None
        return keys

    def _decode_metadata(self, keys: bytearray | None) -> None:
        """Decode the top-level keys into the envelope: those before ``traceEvents``, and ``keys`` after it."""
        document = None
        if keys is not None:
            document = self._decode(self._header + b'"traceEvents": []' + keys)
            if not isinstance(document, dict):
                document = self._decode_tolerant(self._header + b'"traceEvents": []' + keys)
            if not isinstance(document, dict):
                self._truncated()
        if not isinstance(document, dict):
            document = self._decode(self._header + b'"traceEvents": []}')
        if isinstance(document, dict):
            document.pop("traceEvents", None)
            self.envelope.metadata = document

    def _without_events_key(self, data: bytes) -> None:
        """A stream with no ``traceEvents`` key: empty, not JSON, or JSON of another kind."""
        if not data.strip():
            if not self.envelope.problems:
                self._problem("empty_file", "file is empty")
            return
        document = self._decode(data)
        if document is None:
            if not self.envelope.problems:
                self._problem("invalid_json", "not valid JSON (no traceEvents key found before the data ends)")
            return
        keys = ", ".join(list(document)[:6]) if isinstance(document, dict) else type(document).__name__
        self._problem("not_a_kineto_trace", f"valid JSON but not a Kineto trace: no traceEvents (found: {keys})")

    def _decode(self, data: bytes) -> Any:
        """orjson-decode ``data``; on invalid UTF-8 decode a repaired copy and record it; None if invalid."""
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            repaired, count = sanitize_utf8(data)
            try:
                document = orjson.loads(repaired)
            except orjson.JSONDecodeError:
                return None
            self._problem("invalid_utf8", f"{count} invalid UTF-8 byte sequences replaced by U+FFFD")
            return document
        return None

    def _decode_tolerant(self, data: bytes) -> Any:
        """Decode JSON that orjson refused for bad values alone (``NaN``, lone surrogate escapes,
        repeated keys), recording what was repaired; None if the text itself is broken."""
        counts: Counter[str] = Counter()
        data, counts["invalid_utf8"] = sanitize_utf8(data)
        data, counts["invalid_surrogate"] = repair_surrogates(data)
        try:
            document = tolerant_loads(data, counts)
        except (ValueError, RecursionError):  # RecursionError: a key nested past Python's recursion limit
            return None
        for code, count in counts.items():
            if count:
                self.envelope.problems.append(StreamProblem(code, message(code, count), CODES[code][0], count))
        return document
