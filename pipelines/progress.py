"""Progress of long work, for whoever shows it (the command line's progress bar): the parse reports the bytes read of
each trace file, the analysis tables each model built. Nothing is counted while no one listens."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import IO

Listener = Callable[[str, str, int, int], None]
"""Called with (kind, item, done, total): kind ``read`` (item: a file, in bytes) or ``models`` (item: a run)."""

_listeners: list[Listener] = []


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Call ``listener`` with every report while the block runs (reports may come from several threads)."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def report(kind: str, item: str, done: int, total: int) -> None:
    """Tell every listener that ``done`` of ``total`` of ``item``'s work is done."""
    for listener in _listeners:
        listener(kind, item, done, total)


class _CountedReads:
    """A binary file whose reads are reported as bytes read of its ``total``: at each read, the bytes before it,
    which the reader has used up by then (a gzip block inflates to ten times its size, which takes its time)."""

    def __init__(self, raw: IO[bytes], item: str, total: int) -> None:
        self._raw, self._item, self._total = raw, item, total

    def read(self, size: int = -1) -> bytes:
        report("read", self._item, self._raw.tell(), self._total)
        block = self._raw.read(size)
        if not block:
            report("read", self._item, self._total, self._total)
        return block

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()


def reading(raw: IO[bytes], item: str, total: int) -> IO[bytes]:
    """``raw``, its reads reported as progress of ``item`` (``total`` bytes) while anyone listens."""
    return _CountedReads(raw, item, total) if _listeners else raw  # type: ignore[return-value]  # reads alike
