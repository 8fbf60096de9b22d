"""Vega-Lite specs to SVG, in a helper process that starts vl-convert's engine ahead of the first chart.

vl-convert boots a V8 engine on its first render: 0.4-0.6 s, all of it holding the GIL. An ingest renders its
first chart only after the parse and the models, so it starts this helper first thing, while its own work before
the parse (opening the Dagster instance, starting the run) leaves the second core idle: the boot is off the
ingest's path. A chart handed to the helper renders there while the caller goes on (a report's next queries), on
the other core. Where no helper was started, or it is gone, charts render in-process.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
from collections import deque
from concurrent.futures import Future
from typing import IO, Any

log = logging.getLogger(__name__)

_WARM_UP = {"data": {"values": [{"x": 1}]}, "mark": "bar", "encoding": {"x": {"field": "x", "type": "quantitative"}}}


class _HelperGone(Exception):
    """The helper exited before it answered."""


class _Helper:
    """One helper process: a spec per line on its stdin, a JSON reply per line on its stdout, in order."""

    def __init__(self) -> None:
        # It exits when its stdin closes, so a parent that dies takes it along. Run as a script (needing only the
        # standard library and vl_convert), whatever makes this package importable here (a checkout's working
        # folder, an editable install, a wheel); -P keeps this module's folder off its sys.path.
        self._process = subprocess.Popen(
            [sys.executable, "-P", os.path.abspath(__file__)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self._writing = threading.Lock()
        self._lock = threading.Lock()  # over what waits and whether it is gone
        self._waiting: deque[Future[str]] = deque()  # one per spec sent and not answered yet
        self._closing = False
        self.gone = False
        threading.Thread(target=self._read_replies, name="chart-helper", daemon=True).start()

    def submit(self, spec: dict[str, Any]) -> Future[str]:
        """A future of ``spec``'s SVG; it raises ValueError where vl-convert refused the spec, and
        :class:`_HelperGone` where the helper exited first."""
        stdin: IO[bytes] = self._process.stdin  # type: ignore[assignment]
        reply: Future[str] = Future()
        # Specs go out in the order their futures wait. The write blocks while the helper renders the spec before
        # (a pipe holds 64 KiB): the reader takes replies meanwhile, so it never waits on the writing lock.
        with self._writing:
            with self._lock:
                if self.gone:
                    reply.set_exception(_HelperGone())
                    return reply
                self._waiting.append(reply)
            # A broken pipe means it died: the reader fails what waits once it meets the end of its output.
            with contextlib.suppress(OSError):
                stdin.write(json.dumps(spec).encode() + b"\n")
                stdin.flush()
        return reply

    def _read_replies(self) -> None:
        stdout: IO[bytes] = self._process.stdout  # type: ignore[assignment]
        try:
            for line in stdout:
                reply = json.loads(line)
                with self._lock:
                    waiting = self._waiting.popleft()
                if "error" in reply:
                    waiting.set_exception(ValueError(reply["error"]))
                else:
                    waiting.set_result(reply["svg"])
        except (ValueError, IndexError, KeyError):  # a line that is no reply to a spec sent: trust it no more
            self._process.kill()
        code = self._process.wait()
        with self._lock:
            self.gone = True
            unanswered = list(self._waiting)
            self._waiting.clear()
        if not self._closing:
            log.warning("the chart helper exited (code %s); rendering charts in this process", code)
        for waiting in unanswered:
            waiting.set_exception(_HelperGone())

    def close(self) -> None:
        self._closing = True
        stdin: IO[bytes] = self._process.stdin  # type: ignore[assignment]
        with contextlib.suppress(BrokenPipeError):  # it is gone already
            stdin.close()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()


_helper: _Helper | None = None


def start_helper() -> None:
    """Start this process's helper, unless it has one running; where none can start, charts render in-process."""
    global _helper
    if _helper is None or _helper.gone:
        try:
            _helper = _Helper()
        except OSError as exc:  # no interpreter to start (an embedded Python), or no processes left
            log.warning("cannot start the chart helper (%s); rendering charts in this process", exc)
            return
        atexit.register(_helper.close)


def _forget_helper() -> None:
    global _helper
    _helper = None


# A forked child shares the parent's pipes: its specs and the parent's would interleave. It renders in-process.
os.register_at_fork(after_in_child=_forget_helper)


class PendingSvg:
    """A spec being rendered: by the helper when one was started, else (or should it exit first) in-process."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._spec = spec
        self._reply = _helper.submit(spec) if _helper is not None and not _helper.gone else None

    def result(self) -> str:
        """The SVG; raises ValueError where vl-convert refused the spec."""
        if self._reply is not None:
            with contextlib.suppress(_HelperGone):
                return self._reply.result()
        import vl_convert

        return vl_convert.vegalite_to_svg(self._spec)


def _serve() -> None:
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")  # the pipe to the parent carries replies only:
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # whatever else prints goes to stderr
    import vl_convert

    vl_convert.vegalite_to_svg(_WARM_UP)
    for line in sys.stdin.buffer:
        try:
            reply = {"svg": vl_convert.vegalite_to_svg(json.loads(line))}
        except ValueError as exc:  # what vl-convert raises for a spec it cannot render
            reply = {"error": str(exc)}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    _serve()
