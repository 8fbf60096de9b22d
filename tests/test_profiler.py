"""trace_handler writes each profiling window of each rank to its own gzipped file, locally or to S3."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from moto.server import ThreadedMotoServer
from torch.profiler import ProfilerActivity, profile, schedule

from pipelines.storage import filesystem
from tracelake.profiler import current_rank, default_run_id, publish, trace_handler

RUN_ENV = ("TRACELAKE_RUN_ID", "TORCHELASTIC_RUN_ID", "RANK")
# Clearing events between windows is what repeated windows are for.
pytestmark = pytest.mark.filterwarnings("ignore:Warning. Profiler clears events:UserWarning")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in RUN_ENV:
        monkeypatch.delenv(name, raising=False)


def _profile_two_windows(handler) -> None:
    """Two windows of one step each, closing at steps 2 and 4."""
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=1, repeat=2),
        on_trace_ready=handler,
    ) as prof:
        weights = torch.randn(16, 16)
        for _ in range(4):
            weights = (weights @ weights).tanh()
            prof.step()


def test_two_windows_of_one_rank_write_two_gzipped_traces(tmp_path: Path) -> None:
    _profile_two_windows(trace_handler(str(tmp_path), run_id="job"))
    names = sorted(p.name for p in (tmp_path / "job").iterdir())
    assert names == ["rank-0.step2.pt.trace.json.gz", "rank-0.step4.pt.trace.json.gz"]  # no hidden leftovers
    for name, step in zip(names, (1, 3), strict=True):
        trace = json.loads(gzip.decompress((tmp_path / "job" / name).read_bytes()))
        steps = {e["name"] for e in trace["traceEvents"] if e["name"].startswith("ProfilerStep#")}
        assert steps == {f"ProfilerStep#{step}"}


def test_rank_comes_from_env_without_a_process_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("TRACELAKE_RUN_ID", "from_env")
    _profile_two_windows(trace_handler(str(tmp_path)))
    assert sorted(p.name for p in (tmp_path / "from_env").iterdir()) == [
        "rank-3.step2.pt.trace.json.gz", "rank-3.step4.pt.trace.json.gz",
    ]


def test_bad_rank_env_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "two")
    with pytest.raises(ValueError, match="RANK='two'"):
        current_rank()


def test_default_run_id_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", default_run_id())
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")  # torchrun's placeholder when no rendezvous id is given
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", default_run_id())
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "elastic-42")
    assert default_run_id() == "elastic-42"
    monkeypatch.setenv("TRACELAKE_RUN_ID", "mine")
    assert default_run_id() == "mine"


@pytest.fixture
def process_group(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A one-rank gloo process group in this process, on a store port the OS picks."""
    store = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, timeout=timedelta(seconds=30))
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_process_group_gives_rank_and_one_shared_run_id(
    process_group: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "5")
    assert current_rank() == 0  # the process group wins over the environment
    first = default_run_id()
    assert default_run_id() == first  # a later caller (another rank) adopts the first one's id


@pytest.fixture
def s3_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An empty bucket on a moto S3 server on loopback, with the AWS environment pointing at it."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    fs, _ = filesystem("s3://traces")
    fs.mkdir("traces")
    try:
        yield "s3://traces/prefix"
    finally:
        server.stop()


def test_traces_upload_to_object_storage(s3_url: str) -> None:
    _profile_two_windows(trace_handler(s3_url, run_id="job"))
    fs, root = filesystem(s3_url)
    fs.invalidate_cache()
    assert sorted(fs.ls(f"{root}/job", detail=False)) == [
        f"{root}/job/rank-0.step2.pt.trace.json.gz", f"{root}/job/rank-0.step4.pt.trace.json.gz",
    ]
    trace = json.loads(gzip.decompress(fs.cat_file(f"{root}/job/rank-0.step4.pt.trace.json.gz")))
    assert any(e["name"] == "ProfilerStep#3" for e in trace["traceEvents"])


def test_failed_write_names_the_destination(tmp_path: Path) -> None:
    (tmp_path / "blocked").write_text("a file where the run folder should be")
    local = tmp_path / "trace.json.gz"
    local.write_bytes(gzip.compress(b"{}"))
    fs, root = filesystem(str(tmp_path))
    dest = f"{root}/blocked/rank-0.step1.pt.trace.json.gz"
    with pytest.raises(OSError, match=re.escape(f"could not write trace {dest}")):
        publish(fs, local, dest)
