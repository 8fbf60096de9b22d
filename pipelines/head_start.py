"""A trace's parse started before the step that stages it, and that step taking it over.

``tracelake ingest`` spends its first ~1.5 s importing Dagster, opening its instance and starting the first run: Python
on one core while the other idles. So it starts the first trace's parse before all that (:func:`parse_ahead`), and
the run's parse step takes it over (:func:`parsed_trace`) where the file (URL, size, etag, modification time) and the
parse settings are the same; any other parse starts in its step as before. Everything else about the step (its
staging, events and outcome) is as when it parses the trace itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.identity import TraceFile, claim_rank
from pipelines.parse import ParsedTrace, ParseSettings, parse_trace
from pipelines.quality import QualityIssue
from pipelines.scratch import scratch_dir
from pipelines.storage import filesystem

log = logging.getLogger(__name__)


def parse_file(trace: TraceFile, options: dict[str, Any] | None, workdir: Path, settings: ParseSettings) -> ParsedTrace:
    """Parse one trace into ``workdir``; an unexpected failure becomes a failed trace with a ``parse_failed`` error.

    Damaged input never raises (parse_trace reports it); this catches the rest (the file vanished,
    the store refused the read, a parser bug), so one trace never keeps the others of its run out.
    """
    try:
        fs, path = filesystem(trace.url, options)
        return parse_trace(fs, path, trace, workdir=workdir, settings=settings)
    except Exception as exc:
        log.exception("parsing %s failed", trace.url)
        issue = QualityIssue(
            trace.run_id, trace.trace_id, "error", "parse_failed", f"could not be parsed: {type(exc).__name__}: {exc}"
        )
        return ParsedTrace(trace=trace, rank=claim_rank({}, trace), issues=[issue])


@dataclass
class _Started:
    parsed: Future[ParsedTrace]
    started_at: float
    """``time.perf_counter()`` when the parse began."""
    folder: ExitStack
    """Holds the parse's scratch folder, removed on close."""


_started: dict[tuple[TraceFile, ParseSettings], _Started] = {}
_lock = threading.Lock()


def parse_ahead(trace: TraceFile, options: dict[str, Any] | None, settings: ParseSettings) -> None:
    """Start parsing ``trace`` on a thread of its own, for the step that stages it to take over."""
    folder = ExitStack()
    workdir = folder.enter_context(scratch_dir("parse"))
    started = _Started(Future(), time.perf_counter(), folder)

    def parse() -> None:
        try:
            started.parsed.set_result(parse_file(trace, options, workdir, settings))
        except BaseException as exc:  # parse_file turns failures into issues; this is an interrupt or worse
            started.parsed.set_exception(exc)

    with _lock:
        _started[(trace, settings)] = started
    threading.Thread(target=parse, name="parse-ahead", daemon=True).start()


@contextmanager
def parsed_trace(
    trace: TraceFile, options: dict[str, Any] | None, settings: ParseSettings
) -> Iterator[tuple[ParsedTrace, float]]:
    """``trace`` parsed, and ``time.perf_counter()`` when its parse began: the parse started ahead with these
    settings if there is one, else one started now. Its files live until the block ends."""
    with _lock:
        started = _started.pop((trace, settings), None)
    if started is None:
        began = time.perf_counter()
        with scratch_dir("parse") as workdir:
            yield parse_file(trace, options, workdir, settings), began
        return
    with started.folder:
        yield started.parsed.result(), started.started_at


def discard_parses_ahead() -> None:
    """Let go of the parses started ahead that no step took (the run failed first, or parsed with other settings):
    each one's folder goes once its parse ends, without waiting for it here, so that an ingest failing before its
    parse step says so at once. A process that exits first leaves the folder to the next ingest's sweep."""
    with _lock:
        unused = list(_started.values())
        _started.clear()
    for started in unused:
        started.parsed.add_done_callback(lambda _, folder=started.folder: folder.close())
