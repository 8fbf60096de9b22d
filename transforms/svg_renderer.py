"""Vega-Lite specs to SVG, in a helper process that starts vl-convert's engine ahead of the first chart.

vl-convert boots a V8 engine on its first render: 0.4-0.6 s, all of it holding the GIL. An ingest renders its
first chart only after the parse and the models, so it starts this helper first thing, while its own work before
the parse (opening the Dagster instance, starting the run) leaves the second core idle: the boot is off the
ingest's path. Where no helper was started, or it is gone, charts render in-process.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import subprocess
import sys
import threading
from typing import IO, Any

log = logging.getLogger(__name__)

_WARM_UP = {"data": {"values": [{"x": 1}]}, "mark": "bar", "encoding": {"x": {"field": "x", "type": "quantitative"}}}


class _Helper:
    """One helper process: a spec per line on its stdin, a JSON reply per line on its stdout."""

    def __init__(self) -> None:
        # It exits when its stdin closes, so a parent that dies takes it along.
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self._lock = threading.Lock()

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def render(self, spec: dict[str, Any]) -> str | None:
        """The SVG of ``spec``, or None when the helper is gone. Raises ValueError where vl-convert refused it."""
        stdin: IO[bytes] = self._process.stdin  # type: ignore[assignment]
        stdout: IO[bytes] = self._process.stdout  # type: ignore[assignment]
        with self._lock:
            try:
                stdin.write(json.dumps(spec).encode() + b"\n")
                stdin.flush()
                line = stdout.readline()
            except OSError:  # a broken pipe: it died
                line = b""
        if not line:  # its end of the pipes closed: it exited
            log.warning("the chart helper exited (code %s); rendering charts in this process", self._process.wait())
            return None
        reply = json.loads(line)
        if "error" in reply:
            raise ValueError(reply["error"])
        return reply["svg"]

    def close(self) -> None:
        stdin: IO[bytes] = self._process.stdin  # type: ignore[assignment]
        with contextlib.suppress(BrokenPipeError):  # it is gone already
            stdin.close()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()


_helper: _Helper | None = None


def start_helper() -> None:
    """Start this process's helper, unless it has one running."""
    global _helper
    if _helper is None or not _helper.alive:
        _helper = _Helper()
        atexit.register(_helper.close)


def vegalite_to_svg(spec: dict[str, Any]) -> str:
    """``spec`` rendered to SVG: by the helper when one was started, else in-process."""
    global _helper
    if _helper is not None:
        svg = _helper.render(spec)
        if svg is not None:
            return svg
        _helper = None
    import vl_convert

    return vl_convert.vegalite_to_svg(spec)


def _serve() -> None:
    import vl_convert

    vl_convert.vegalite_to_svg(_WARM_UP)
    for line in sys.stdin.buffer:
        try:
            reply = {"svg": vl_convert.vegalite_to_svg(json.loads(line))}
        except ValueError as exc:  # what vl-convert raises for a spec it cannot render
            reply = {"error": str(exc)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()
