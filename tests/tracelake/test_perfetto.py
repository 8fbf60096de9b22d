""""Open in Perfetto": the report opens the Perfetto UI and hands it the trace by Perfetto's documented
postMessage handshake (PING until PONG, then ``{perfetto: {buffer, title, fileName}}``). A stand-in page on
loopback plays Perfetto UI's part in a real headless Chromium and reports what it received."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from tests.support.browser import chromium
from tracelake import open_lake

pytestmark = pytest.mark.slow

RUN = "rocm_mi250"
# Perfetto UI's side of the protocol: answer PING from the window that opened it with PONG, take the trace.
STAND_IN = """<!DOCTYPE html><html><body><script>
let pings = 0;
window.addEventListener('message', async (event) => {
  if (event.source !== window.opener) return;
  if (event.data === 'PING') { pings += 1; event.source.postMessage('PONG', '*'); return; }
  const sent = event.data.perfetto;
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', sent.buffer));
  await fetch('/received', {method: 'POST', body: JSON.stringify({
    pings, keys: Object.keys(sent).sort(), title: sent.title, fileName: sent.fileName,
    isArrayBuffer: sent.buffer instanceof ArrayBuffer, byteLength: sent.buffer.byteLength,
    sha256: [...digest].map((b) => b.toString(16).padStart(2, '0')).join('')})});
});
</script></body></html>"""


class _Handler(SimpleHTTPRequestHandler):
    """Serves the reports folder and the stand-in page; keeps what the stand-in posts."""

    received: ClassVar[list[dict]] = []

    def do_GET(self) -> None:
        if self.path == "/perfetto.html":
            body = STAND_IN.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            super().do_GET()

    def do_POST(self) -> None:
        self.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_open_in_perfetto_sends_the_trace_file(example_lake):
    uri, trace_id = open_lake(str(example_lake)).execute(
        "select source_uri, trace_id from traces where run_id = $run", {"run": RUN}).fetchone()
    original = Path(uri).read_bytes()
    handler = partial(_Handler, directory=str(example_lake / "reports"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    _Handler.received.clear()
    try:
        with chromium() as browser, browser.page() as page:
            page.goto(f"{base}/{RUN}.html")
            label = page.evaluate(f"document.body.dataset.perfettoUrl = '{base}/perfetto.html'; "
                                  "const b = document.querySelector('button.perfetto'); b.click(); b.textContent")
            deadline = time.monotonic() + 60
            while not _Handler.received and time.monotonic() < deadline:
                time.sleep(0.2)
    finally:
        server.shutdown()
        server.server_close()

    assert label == "Open in Perfetto"  # the trace is embedded: no file to choose
    assert len(_Handler.received) == 1, "the stand-in Perfetto UI got no trace"
    sent = _Handler.received[0]
    assert sent["pings"] >= 1  # the trace went only after the handshake
    assert sent["keys"] == ["buffer", "fileName", "title"]
    assert sent["isArrayBuffer"]
    assert sent["byteLength"] == len(original)
    assert sent["sha256"] == hashlib.sha256(original).hexdigest()  # the file itself, byte for byte (gzip and all)
    assert sent["fileName"] == Path(uri).name
    assert sent["title"] == f"{RUN} {trace_id}"
