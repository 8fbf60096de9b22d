"""Cut a Kineto trace stream into JSON arrays of whole events, and recover its top-level keys.

libkineto pretty-prints every event as a block that starts with ``"  {"`` at two spaces of indent,
so ``"\\n  },\\n  {"`` only ever separates two top-level events: a raw newline cannot occur inside
a JSON string and nested objects are indented deeper. Cutting there lets a trace of any size be
parsed in bounded pieces without a byte-by-byte scan in Python. Traces written by other tools
(compact one-line JSON) have no such separator and are decoded whole once they end.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import orjson
from isal import isal_zlib

from pipelines.checks import CODES, message

EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
KINETO_BOUNDARY = b"\n  },\n  {"
_KINETO_EVENTS_END = b"\n  }\n  ]"
COMPACT_BOUNDARY = re.compile(rb"\}(\s*),\s*\{")  # group 1 ends where the comma is
# An escaped backslash (kept, so that ``\\ud800`` is not read as an escape), a valid surrogate
# pair (kept), or a lone surrogate escape (group 1: replaced).
_SURROGATE_ESCAPE = re.compile(
    rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})"
)
_READ_BLOCK = 8 << 20
_STREAM_ERRORS = (OSError, EOFError, ValueError, zlib.error, isal_zlib.error)


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
            except isal_zlib.error as exc:
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


class EventChunker:
    """Iterate over JSON-array chunks of whole events; ``envelope`` is complete once iteration ends.

    Args:
        stream: decompressed trace bytes.
        chunk_bytes: target chunk size; a chunk is cut at the last event boundary past this size.
    """

    def __init__(self, stream: IO[bytes], *, chunk_bytes: int) -> None:
        self._stream = stream
        self._chunk_bytes = chunk_bytes
        self._header = b""
        self._events = bytearray()  # events read but not yet handed out, after an opening "["
        self.envelope = TraceEnvelope()

    def _read(self) -> bytes:
        """Next block of bytes; ``b""`` at the end or when the stream breaks (recorded as a problem)."""
        try:
            block = self._stream.read(_READ_BLOCK)
        except EOFError:
            self._problem("truncated_gzip", "gzip stream ends before its end-of-stream marker")
            return b""
        except _STREAM_ERRORS as exc:
            self._problem("corrupt_gzip", f"gzip data is corrupt ({exc})")
            return b""
        self.envelope.bytes_read += len(block)
        return block

    def _problem(self, code: str, message: str, severity: str = "error") -> None:
        self.envelope.problems.append(StreamProblem(code, message, severity))

    def __iter__(self) -> Iterator[bytes | bytearray]:
        buf = bytearray()
        match = None
        while match is None:
            block = self._read()
            if not block:
                yield from self._finish_without_events_key(bytes(buf))
                return
            search_from = max(0, len(buf) - 32)
            buf += block
            match = EVENTS_KEY.search(buf, search_from)
        self.envelope.has_events_key = True
        self._header = bytes(buf[: match.start()])
        prefix = bytes(buf[: match.end()])
        buf[: match.end()] = b"["  # the events read so far, behind the opening of their JSON array
        self._events = buf
        del buf, match  # a match holds the buffer it searched, which becomes the first chunk

        kineto_layout = True
        while block := self._read():
            self._events += block
            if kineto_layout and len(self._events) >= self._chunk_bytes:
                cut = self._events.rfind(KINETO_BOUNDARY)
                if cut < 0:
                    kineto_layout = False  # compact JSON: decoded whole at the end
                    continue
                yield self._take_events(cut + 4, cut + len(KINETO_BOUNDARY) - 1)
        yield from self._finish(prefix)

    def _take_events(self, end: int, rest: int) -> bytearray:
        """The buffered events before ``end``, closed into a JSON array; the buffer keeps those from ``rest``.

        The buffer itself is handed over, not copied, and it is returned rather than bound in the
        generator's frame: it is freed as soon as its consumer lets go of it.
        """
        events = self._events
        with memoryview(events) as view:
            self._events = bytearray(b"[") + view[rest:]
        del events[end:]
        events += b"]"
        return events

    def _finish(self, prefix: bytes) -> Iterator[bytes | bytearray]:
        """The last events, and the keys that follow ``traceEvents`` decoded into the envelope.

        In libkineto's layout the events array ends with ``"\n  }\n  ]"``: the keys after it are
        decoded alone and the events passed on as they are. Otherwise (compact JSON, a truncated
        or broken end) the events are decoded here too, and salvaged if they must be.
        """
        end = self._events.rfind(_KINETO_EVENTS_END)
        if end >= 0:
            keys = self._events[end + len(_KINETO_EVENTS_END) :]
            metadata = self._decode(self._header + b'"traceEvents": []' + keys)
            if isinstance(metadata, dict):
                metadata.pop("traceEvents", None)
                self.envelope.metadata = metadata
                yield self._take_events(end + 4, len(self._events))
                return
        tail = bytes(memoryview(self._events)[1:])  # without the "[" put in front
        self._events = bytearray()
        problems = len(self.envelope.problems)
        document = self._decode(prefix + tail)
        as_written = len(self.envelope.problems) == problems  # not repaired on the way
        if document is None:
            document, as_written = self._decode_tolerant(prefix + tail), False
        if isinstance(document, dict) and isinstance(document.get("traceEvents"), list):
            events_last = list(document)[-1] == "traceEvents"
            events = document.pop("traceEvents")
            self.envelope.metadata = document
            if not events:
                return
            body = tail.rstrip().removesuffix(b"}").rstrip()
            if as_written and events_last and body.endswith(b"]"):
                # The events as written, so that the parser sees each bad one (a repeated key) itself.
                yield b"[" + body
            elif as_written:  # orjson keeps the last value of a repeated key, unreported
                yield orjson.dumps(events)
            else:  # NaN stays NaN for DuckDB's reader to report; orjson would write null
                yield json.dumps(events, ensure_ascii=False).encode("utf-8")
            return
        if not any(p.code.startswith(("truncated", "corrupt")) for p in self.envelope.problems):
            self._problem("truncated_json", f"JSON ends early or is malformed after byte {self.envelope.bytes_read}")
        self.envelope.metadata = self._decode(self._header + b'"traceEvents": []}') or {}
        self.envelope.metadata.pop("traceEvents", None)
        salvaged = self._salvage(tail)
        if salvaged:
            yield salvaged

    def _finish_without_events_key(self, data: bytes) -> Iterator[bytes]:
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
        yield from ()  # no events: a generator that yields nothing

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
        """Decode JSON that orjson refused for bad events alone (``NaN``, lone surrogate escapes,
        repeated keys), recording what was repaired; None if the text itself is broken."""
        counts: Counter[str] = Counter()
        data, counts["invalid_utf8"] = sanitize_utf8(data)
        data, counts["invalid_surrogate"] = repair_surrogates(data)
        try:
            document = tolerant_loads(data, counts)
        except ValueError:
            return None
        for code, count in counts.items():
            if count:
                self.envelope.problems.append(StreamProblem(code, message(code, count), CODES[code][0], count))
        return document

    def _salvage(self, tail: bytes) -> bytes | None:
        """The longest run of whole events at the start of ``tail``, as a JSON array."""
        return longest_event_prefix(tail, self._decode)


def longest_event_prefix(events: bytes, decode: Callable[[bytes], Any]) -> bytes | None:
    """The longest prefix of comma-separated ``events`` that decodes, as a JSON array; None if none does.

    Whether a prefix decodes is monotonic in its length (damage only ever ends it), so a binary
    search over event boundaries needs O(log n) decodes.
    """
    ends = [m.start() + 4 for m in re.finditer(re.escape(KINETO_BOUNDARY), events)]
    ends = ends or [m.start() + 1 for m in COMPACT_BOUNDARY.finditer(events)]
    best, low, high = None, 0, len(ends) - 1
    while low <= high:
        middle = (low + high) // 2
        chunk = b"[" + events[: ends[middle]] + b"]"
        if decode(chunk) is not None:
            best, low = chunk, middle + 1
        else:
            high = middle - 1
    return best
