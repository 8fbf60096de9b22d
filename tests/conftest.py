"""Shared fixtures: a real S3 server on loopback (moto), and a lake of the shipped example traces."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import s3fs

from tests.support.servers import EXAMPLE_TRACES, free_port


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A moto S3 server on loopback; the AWS variables point at it (for this process and children)."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for key, value in {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    try:
        yield endpoint
    finally:
        server.stop()


@pytest.fixture
def bucket(s3_server: str) -> s3fs.S3FileSystem:
    """An empty bucket ``traces`` on the loopback server; the filesystem caches no listings."""
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_server}, skip_instance_cache=True, use_listings_cache=False)
    fs.mkdir("traces")
    return fs


@pytest.fixture(scope="session")
def example_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local lake of the shipped example traces (three runs), built once by ``tracelake ingest``."""
    from tracelake.ingest import ingest

    lake = tmp_path_factory.mktemp("example") / "lake"
    assert ingest(str(EXAMPLE_TRACES), str(lake)) == 0
    return lake
