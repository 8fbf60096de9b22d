"""Progress of an ingest as the terminal's conventions want it: on a terminal, a bar per trace file (bytes read of
it) and one for the analysis tables (models built of N); elsewhere (a CI log, a pipe), a plain line now and then for
work that takes long, and nothing for work that does not."""

from __future__ import annotations

import contextlib
import posixpath
import sys
import threading
import time
from collections.abc import Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

from pipelines.progress import listening
from transforms.units import format_bytes

PLAIN_EVERY_S = 10.0
"""Without a terminal, an item's progress is printed once it has taken this long, and then at most this often."""


def _label(kind: str, item: str) -> str:
    return f"parse {posixpath.basename(item)}" if kind == "read" else f"build {item}"


class _Bars:
    """One rich task per item, made on its first report."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._tasks: dict[tuple[str, str], TaskID] = {}
        self._lock = threading.Lock()

    def __call__(self, kind: str, item: str, done: int, total: int) -> None:
        with self._lock:
            key = (kind, item)
            if kind == "models" and done == 1:  # the parse is over: its bars give way
                for other in [k for k in self._tasks if k[0] == "read"]:
                    self._progress.remove_task(self._tasks.pop(other))
            if key not in self._tasks or (kind == "models" and done == 1):  # a new run's tables start again
                if key in self._tasks:
                    self._progress.remove_task(self._tasks[key])
                self._tasks[key] = self._progress.add_task(_label(kind, item), total=total, bytes=kind == "read")
            self._progress.update(self._tasks[key], completed=done, total=total)


class _Lines:
    """A plain line for an item that has taken :data:`PLAIN_EVERY_S`, and then at most that often."""

    def __init__(self) -> None:
        self._started: dict[tuple[str, str], float] = {}
        self._printed: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def __call__(self, kind: str, item: str, done: int, total: int) -> None:
        now = time.monotonic()
        key = (kind, item)
        with self._lock:
            if kind == "models" and done == 1:
                self._started.pop(key, None)
            started = self._started.setdefault(key, now)
            if done >= total or now - max(started, self._printed.get(key, started)) < PLAIN_EVERY_S:
                return
            self._printed[key] = now
        amount = f"{format_bytes(done)} of {format_bytes(total)}" if kind == "read" else f"{done} of {total} models"
        print(f"    {_label(kind, item)}: {100 * done / max(total, 1):.0f} % ({amount})", flush=True)


class _Amount(DownloadColumn):
    """Bytes for a file's task, models built of N for the analysis tables'."""

    def __init__(self) -> None:
        super().__init__(binary_units=True)
        self._count = MofNCompleteColumn()

    def render(self, task):  # type: ignore[no-untyped-def]  # rich's own signature
        return super().render(task) if task.fields.get("bytes") else self._count.render(task)


@contextlib.contextmanager
def ingest_progress(*, bars: bool) -> Iterator[None]:
    """Show the progress of the work in the block: bars (``bars``, for a terminal) or plain lines."""
    if not bars:
        with listening(_Lines()):
            yield
        return
    console = Console(file=sys.stdout)
    columns = (TextColumn("  {task.description}"), BarColumn(), TaskProgressColumn(), _Amount(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True, redirect_stdout=True) as progress, \
            listening(_Bars(progress)):
        yield
