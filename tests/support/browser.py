"""A real headless Chromium driven over the DevTools protocol: load a page, read its DOM and layout, screenshot it.

Just the protocol calls the page tests need (no Selenium or Playwright on the machine). Chromium comes from the
Debian package (``apt-get install -y chromium``); tests skip when it is absent.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-popup-blocking", "--remote-debugging-port=0", "--remote-allow-origins=*")


def chromium_path() -> str:
    """The Chromium binary, or a skip when it is not installed."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return path


class Page:
    """One browser tab: protocol commands in order, events kept until read."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Run one protocol command and return its result (raises on a protocol error)."""
        ident = next(self.ids)
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=120))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_event(self, method: str, timeout: float = 60) -> dict[str, Any]:
        """The first event named ``method`` (seen already or arriving within ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)["params"]
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {method} event within {timeout} s")
            self.events.append(json.loads(self.socket.recv(timeout=left)))

    def goto(self, url: str, *, width: int = 1280, height: int = 900) -> None:
        """Load ``url`` in a ``width``×``height`` viewport and wait for its load event."""
        self.send("Page.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        self.send("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page (promises awaited)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, *, full_page: bool = True) -> bytes:
        """A PNG of the page (the whole scrollable page with ``full_page``), saved to ``path``."""
        data = base64.b64decode(self.send("Page.captureScreenshot", format="png",
                                          captureBeyondViewport=full_page)["data"])
        path.write_bytes(data)
        return data


class Browser:
    """A headless Chromium process with its DevTools endpoint."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint  # http://127.0.0.1:PORT

    def targets(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.endpoint}/json/list", timeout=10) as response:
            return json.loads(response.read())

    @contextmanager
    def page(self, url: str | None = None) -> Iterator[Page]:
        """A new tab (or the open tab whose URL starts with ``url``)."""
        if url is None:
            request = urllib.request.Request(f"{self.endpoint}/json/new?about:blank", method="PUT")
            with urllib.request.urlopen(request, timeout=10) as response:
                target = json.loads(response.read())
        else:
            target = next(t for t in self.targets() if t.get("url", "").startswith(url) and t["type"] == "page")
        with connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=30) as socket:
            yield Page(socket)


@contextmanager
def chromium() -> Iterator[Browser]:
    """Start headless Chromium on a free DevTools port; stopped (its whole process group) on exit."""
    binary = chromium_path()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        process = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 60
            while not (port_file.exists() and port_file.read_text().strip()):
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("chromium did not open its DevTools port")
                time.sleep(0.1)
            yield Browser(f"http://127.0.0.1:{port_file.read_text().split()[0]}")
        finally:
            os.killpg(process.pid, signal.SIGTERM)  # the renderers too, which write into the profile
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


# What the page tests assert about layout: the page's width against the viewport, each chart's size, any
# element wider than its container (text or a chart running off the page).
LAYOUT = """(() => {
  const doc = document.documentElement;
  const charts = [...document.querySelectorAll('.chart svg')].map((svg) => {
    const box = svg.getBoundingClientRect();
    return {width: box.width, height: box.height, right: box.right};
  });
  const overflowing = [...document.querySelectorAll('td, th, h1, h2, p, dd, nav')]
    .filter((el) => el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX === 'visible')
    .map((el) => el.tagName + ': ' + el.textContent.slice(0, 80));
  return {scrollWidth: doc.scrollWidth, clientWidth: doc.clientWidth, charts, overflowing,
          text: document.body.innerText, headings: [...document.querySelectorAll('h2')].map((h) => h.textContent)};
})()"""
