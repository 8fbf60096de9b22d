"""Find where the elements of a JSON array end, fed its text in pieces, at numpy speed.

Any layout of ``traceEvents`` (compact one-line JSON, other indents, several events per line,
``\\r\\n``) can be cut into whole events this way. A per-byte Python loop would take about a minute
per GB; here numpy finds the few bytes that matter (quotes, backslashes, brackets) and the string
state and nesting depth are prefix sums over those alone: about 1.6 ns per byte for the search,
a few hundred MB/s in all. Commas are not tracked: an element ends where a closing bracket brings
the depth back to the array's, which is enough to cut between events (objects), to measure them and
to find those that nest too deep (DuckDB's JSON reader crashes the process on 200,000 levels).
"""

from __future__ import annotations

import numpy as np

_QUOTE, _BACKSLASH = 0x22, 0x5C
# ``byte | 0x20`` maps "[" to "{" and "]" to "}", and no other byte to either.
_OPEN, _CLOSE = 0x7B, 0x7D
_PIECE = 2 << 20  # bytes scanned at once: bounds numpy's temporaries (~6x the piece)
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')


def max_depth(text: bytes | bytearray) -> int:
    """How deep brackets outside strings nest in JSON ``text`` (``[{}]``: 2), exactly, at a third of the cost of
    :class:`ArrayScanner` (nothing is found, only measured): escaped backslashes and quotes go first, then every
    byte but quotes and brackets, then empty strings (two quotes side by side: every other byte keeps the parity
    of the quotes before it). What is left is mostly brackets, with the quotes of the few strings that hold one.
    """
    if text.find(b"\\") >= 0:
        text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = np.frombuffer(text.translate(None, _NOT_STRUCTURE).replace(b'""', b""), np.uint8)
    quotes = kept == _QUOTE
    if quotes.any():  # quotes so far, modulo 256: odd inside a string (and at its closing quote)
        kept = kept[((np.cumsum(quotes, dtype=np.uint8) & 1) == 0) & ~quotes]
    steps = (kept & 2).view(np.int8) - 1  # "{" and "[" have bit 1 set: +1; "}" and "]": -1
    return int(np.cumsum(steps, dtype=np.int64).max(initial=0))


class ArrayScanner:
    """Tracks a JSON array's structure across pieces of its text, from just after its ``[``.

    String and escape state and the depth carry over from one piece to the next, so a piece may
    end anywhere, inside a string or an escape included. With ``max_depth``, it also tells which
    elements nest deeper than that (an element is depth 1, ``{"a": []}`` depth 2).
    """

    def __init__(self, max_depth: int | None = None) -> None:
        self._in_string = 0  # 1 inside a string
        self._escaped = False  # the next byte is escaped by a backslash at the end of the last piece
        self._depth = 0  # 0 between elements, -1 once the array is closed
        self._max_depth = max_depth
        self._too_deep = False  # the element being read has gone deeper than max_depth
        self.closed = False

    def scan(self, data: bytes | bytearray, start: int = 0) -> tuple[np.ndarray, int, np.ndarray]:
        """Scan ``data[start:]``: where each element that ends in it ends (just after its closing
        ``}``/``]``), and where the array's closing ``]`` is (-1 if not in it), both as offsets
        into ``data``, and which of those elements nest deeper than ``max_depth`` (one flag per end).
        Nothing after the closing ``]`` is scanned.

        A scalar element (``42``, ``"s"``) ends nowhere of its own: it is counted with the next.
        """
        ends, deep = [], []
        close = -1
        for piece in range(start, len(data), _PIECE):
            piece_ends, close, piece_deep = self._scan_piece(data, piece, min(piece + _PIECE, len(data)))
            ends.append(piece_ends + piece)
            deep.append(piece_deep)
            if close >= 0:
                close += piece
                break
        if not ends:
            return np.empty(0, np.int64), close, np.empty(0, bool)
        return np.concatenate(ends), close, np.concatenate(deep)

    def _scan_piece(self, data: bytes | bytearray, start: int, end: int) -> tuple[np.ndarray, int, np.ndarray]:
        if self.closed:
            raise ValueError("the array is already closed")
        # A view of a bytearray pins its size: only this function holds one, and not past its return.
        view = np.frombuffer(data, np.uint8, end - start, start)
        quotes = np.flatnonzero(view == _QUOTE)
        if self._escaped or data.find(b"\\", start, end) >= 0:
            quotes = self._unescaped(quotes, np.flatnonzero(view == _BACKSLASH), end - start)
        folded = view | 0x20
        brackets = folded == _OPEN
        brackets |= folded == _CLOSE
        del folded
        positions = np.flatnonzero(brackets)
        del brackets
        # Outside strings: an even number of quotes before (with the state the piece began in).
        positions = positions[((np.searchsorted(quotes, positions) + self._in_string) & 1) == 0]
        self._in_string = (self._in_string + len(quotes)) & 1
        steps = ((view[positions] & 2).astype(np.int64) - 1)  # "{" and "[" have bit 1 set: +1; "}" and "]": -1
        del view
        depth = np.cumsum(steps) + self._depth
        if not depth.size:
            return np.empty(0, np.int64), -1, np.empty(0, bool)
        close = -1
        outside = np.flatnonzero(depth < 0)
        if outside.size:
            last = outside[0]
            close = int(positions[last])
            positions, steps, depth = positions[:last], steps[:last], depth[:last]
            self.closed = True
        ended = np.flatnonzero((steps < 0) & (depth == 0))
        self._depth = -1 if self.closed else int(depth[-1])
        return positions[ended] + 1, close, self._deep(ended, depth)

    def _deep(self, ended: np.ndarray, depth: np.ndarray) -> np.ndarray:
        """Per element that ends at ``ended`` (indices into ``depth``): whether it went deeper than max_depth."""
        deep = np.zeros(len(ended), bool)
        if self._max_depth is None:
            return deep
        owner = np.searchsorted(ended, np.flatnonzero(depth > self._max_depth))  # the element each level is in
        if self._too_deep and ended.size:
            deep[0] = True
        deep[owner[owner < len(ended)]] = True
        self._too_deep = bool(owner.size and owner[-1] == len(ended)) or (self._too_deep and not ended.size)
        return deep

    def _unescaped(self, quotes: np.ndarray, backslashes: np.ndarray, size: int) -> np.ndarray:
        """``quotes`` without those escaped by a backslash: the byte after an odd run of them."""
        escaped = np.empty(0, np.int64)
        carried = self._escaped
        if backslashes.size:
            run_start = np.flatnonzero(np.diff(backslashes, prepend=-2) != 1)
            run_length = np.diff(run_start, append=len(backslashes))
            after_run = backslashes[run_start + run_length - 1] + 1
            if carried and backslashes[0] == 0:  # that backslash is itself escaped
                run_length[0] -= 1
                carried = False
            escaped = after_run[(run_length & 1) == 1]
        if carried:
            escaped = np.concatenate(([0], escaped))
        self._escaped = bool(escaped.size and escaped[-1] == size)
        if not escaped.size or not quotes.size:
            return quotes
        at = np.minimum(np.searchsorted(quotes, escaped), len(quotes) - 1)
        keep = np.ones(len(quotes), bool)
        keep[at[quotes[at] == escaped]] = False
        return quotes[keep]
