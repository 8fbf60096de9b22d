"""An object store that accepts connections and never answers: commands fail with a clear line instead of hanging."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from pipelines.storage import S3_CALL_ATTEMPTS
from tests.support.s3 import S3Server


@dataclass
class SilentEndpoint:
    url: str
    connections: list[socket.socket] = field(default_factory=list)
    """Every connection accepted (one per request the client made)."""


@pytest.fixture
def silent_endpoint() -> Iterator[SilentEndpoint]:
    """A loopback TCP server that accepts every connection and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    endpoint = SilentEndpoint(f"http://127.0.0.1:{server.getsockname()[1]}")
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                endpoint.connections.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield endpoint
    stop.set()
    thread.join()
    for connection in endpoint.connections:
        connection.close()
    server.close()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["sql", "ingest"])
def test_a_silent_endpoint_times_out_with_one_clear_line(silent_endpoint: SilentEndpoint, moto_s3: S3Server, tmp_path,
                                                         command) -> None:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_ENDPOINT_URL": silent_endpoint.url,
           "TRACELAKE_HTTP_TIMEOUT_S": "2", "TRACELAKE_CATALOG": str(tmp_path / "catalog.sqlite")}
    args = (["sql", "select count(*) from kernels", "--lake", str(tmp_path / "lake")] if command == "sql"
            else ["ingest", "s3://silent/traces", "--lake", str(tmp_path / "lake")])
    if command == "sql":  # a lake whose data is on the silent store: the catalog answers, the data never does
        bucket = f"silent-{uuid.uuid4().hex[:12]}"
        args[3] = f"s3://{bucket}/lake"
        # The catalog is made while the store answers (a new catalog first checks that no data files are there).
        moto_s3.make_bucket(bucket)
        subprocess.run([sys.executable, "-c", f"from pipelines.lake.lake import Lake; Lake({args[3]!r}).connect()"],
                       env=env | moto_s3.env(), check=True, timeout=120)
    done = subprocess.run([sys.executable, "-m", "tracelake.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "127.0.0.1" in done.stderr or "timed out" in done.stderr.lower() or "timeout" in done.stderr.lower()
    if command == "ingest":  # S3_CALL_ATTEMPTS tries of three requests (botocore's), not s3fs's default 5 tries
        assert len(silent_endpoint.connections) <= 3 * S3_CALL_ATTEMPTS, len(silent_endpoint.connections)
