"""Shared fixtures: a real S3 server on loopback (moto), and a lake of the shipped example traces."""

from __future__ import annotations

import shutil
import urllib.request
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
    # moto keeps its buckets in process-wide memory: start every test from an empty store.
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=10).close()
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


def _profile_cpu_mlp(out: Path) -> None:
    """A real torch CPU trace with memory events (three profiled steps of a small MLP)."""
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    out.mkdir(parents=True)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True, record_shapes=True, acc_events=True,
        schedule=torch.profiler.schedule(wait=0, warmup=1, active=3),
        on_trace_ready=lambda prof: prof.export_chrome_trace(str(out / "rank-0.pt.trace.json")),
    ) as prof:
        for _ in range(4):
            optimizer.zero_grad()
            model(torch.randn(64, 256)).sum().backward()
            optimizer.step()
            prof.step()


@pytest.fixture(scope="session")
def example_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local lake of the shipped example traces plus a torch CPU run with memory events (``cpu_mlp``)."""
    from tracelake.ingest import ingest

    root = tmp_path_factory.mktemp("example")
    shutil.copytree(EXAMPLE_TRACES, root / "traces", ignore=shutil.ignore_patterns("*.md"))
    _profile_cpu_mlp(root / "traces" / "cpu_mlp")
    assert ingest(str(root / "traces"), str(root / "lake")) == 0
    return root / "lake"
