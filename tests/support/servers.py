"""Servers and processes that tests start on loopback, always stopped even when a test fails."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_TRACES = ROOT / "examples" / "traces"


def free_port(exclude: set[int] | None = None) -> int:
    """A TCP port free on loopback right now (and not in ``exclude``)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if not exclude or port not in exclude:
            return port


def port_is_free(port: int) -> bool:
    """Whether nothing listens on ``port`` on loopback."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@contextmanager
def process_group(
    command: list[str], *, env: dict[str, str], log: Path, cwd: Path = ROOT
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``command`` in its own process group; SIGINT, then SIGKILL, the whole group on exit, even on failure."""
    with log.open("wb") as out:
        proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield proc
        finally:
            for sig, wait in ((signal.SIGINT, 15), (signal.SIGKILL, 5)):
                try:
                    os.killpg(proc.pid, sig)
                    proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
                except ProcessLookupError:
                    break


def wait_for(predicate, *, timeout: float, interval: float = 1.0, what: str = "condition"):
    """Poll ``predicate`` until it returns a truthy value; fail the test once ``timeout`` seconds have passed with
    the machine unloaded. The deadline stretches with the load average per core while it waits (at a load of 8 on
    2 cores, 4 s count as one): a bound on a hang, never a measure of speed."""
    started = last = time.monotonic()
    waited = 0.0  # seconds waited, each divided by how loaded the machine was
    while waited < timeout:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
        now = time.monotonic()
        waited += (now - last) / max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
        last = now
    pytest.fail(f"timed out after {time.monotonic() - started:.0f} s waiting for {what}")


def wait_for_http(url: str, *, timeout: float) -> None:
    """Wait until ``url`` answers 200."""
    def up() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.status == 200
        except OSError:
            return False
    wait_for(up, timeout=timeout, interval=0.5, what=url)
