"""Session-wide fixtures: real torch traces, made once per session and shared by every test that needs them,
a lake of the example traces, a real S3 server on loopback (moto), and PostgreSQL and Redis servers on loopback.

Treat the folders as read-only: other tests ingest them as SOURCE folders.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import s3fs

from tests.support.databases import PostgresServer, RedisServer, start_postgres, start_redis
from tests.support.s3 import S3Server, moto_server
from tests.support.servers import EXAMPLE_TRACES
from tracelake.workloads import (
    ATTRIBUTION_RUN_ID,
    CPU_RUN_ID,
    GLOO_RUN_ID,
    PIPELINE_RUN_ID,
    profile_attribution,
    profile_gloo_job,
    profile_pipeline_job,
    profile_single_process,
)

GLOO_WORLD_SIZE = 2
REPO = Path(__file__).resolve().parent.parent
SHARED_TRACES = Path(os.environ.get("TRACELAKE_SHARED_TRACES", REPO.parent / "shared" / "traces"))


@pytest.fixture(scope="session", autouse=True)
def dagster_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A Dagster instance home of the session's own: ingest records into one (by default ~/.tracelake/dagster),
    and tests must not write into the user's, nor share one with other sessions."""
    home = tmp_path_factory.mktemp("dagster_home")
    previous = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)
    yield home
    if previous is None:
        os.environ.pop("DAGSTER_HOME", None)
    else:
        os.environ["DAGSTER_HOME"] = previous


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The real public Kineto traces in ../shared/traces (see its README)."""
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"shared traces not found at {SHARED_TRACES} (set TRACELAKE_SHARED_TRACES)")
    return SHARED_TRACES


def _make_run(root: Path, run_id: str, make: Callable[[str], None], ranks: int) -> Path:
    """Run ``make(root)``, check one trace per rank landed in ``root/run_id``, and fail clearly if not."""
    error = None
    try:
        make(str(root))
    except Exception as exc:  # a failed spawn or profiler: every dependent test reports this one message
        error = exc
    if error is not None:
        pytest.fail(f"could not make the {run_id!r} traces under {root}: {error}", pytrace=False)
    written = [p.name for p in sorted((root / run_id).glob("rank-*.pt.trace.json.gz"))]
    if len(written) != ranks:
        pytest.fail(f"expected {ranks} trace file(s) in {root / run_id}, found {written}", pytrace=False)
    return root


@pytest.fixture(scope="session")
def cpu_traces_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding run ``cpu_mlp/``: one single-process MLP trace, ``rank-0.step5.pt.trace.json.gz``."""
    root = tmp_path_factory.mktemp("cpu_traces")
    return _make_run(root, CPU_RUN_ID, profile_single_process, ranks=1)


@pytest.fixture(scope="session")
def gloo_traces_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding run ``gloo_ddp/``: 2-rank uneven gloo DDP, ``rank-{0,1}.step5.pt.trace.json.gz``.

    Rank 1 computes about 20 ms more per step before the collectives, so rank 0 waits in them.
    """
    root = tmp_path_factory.mktemp("gloo_traces")
    return _make_run(
        root,
        GLOO_RUN_ID,
        lambda url: profile_gloo_job(url, world_size=GLOO_WORLD_SIZE, uneven=True),
        ranks=GLOO_WORLD_SIZE,
    )


@pytest.fixture(scope="session")
def attribution_traces_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding run ``cpu_vit/``: TinyViT training with stacks, modules, shapes and FLOPs recorded."""
    root = tmp_path_factory.mktemp("attribution_traces")
    return _make_run(root, ATTRIBUTION_RUN_ID, profile_attribution, ranks=1)


@pytest.fixture(scope="session")
def pipeline_traces_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding run ``gloo_pipeline/``: a 2-stage GPipe pipeline over gloo, 2 micro-batches a step."""
    root = tmp_path_factory.mktemp("pipeline_traces")
    return _make_run(root, PIPELINE_RUN_ID, lambda url: profile_pipeline_job(url, microbatches=2, steps=2), ranks=2)


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[S3Server]:
    """One moto S3 server on loopback for the session; tests keep apart by using buckets of their own."""
    with moto_server() as server:
        yield server


@pytest.fixture
def s3_server(moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """The loopback S3 endpoint, with the AWS variables pointing at it (for this process and children)."""
    for key, value in moto_s3.env().items():
        monkeypatch.setenv(key, value)
    return moto_s3.endpoint


@dataclass(frozen=True)
class Bucket:
    """A fresh bucket on the loopback server (moto keeps buckets process-wide, so each test gets its own name)."""

    fs: s3fs.S3FileSystem
    name: str

    def put(self, key: str, data: bytes) -> None:
        """Write (or overwrite) one object."""
        self.fs.pipe(f"{self.name}/{key}", data)

    def url(self, prefix: str) -> str:
        """``s3://<bucket>/<prefix>``."""
        return f"s3://{self.name}/{prefix}"


@pytest.fixture
def bucket(s3_server: str) -> Bucket:
    """An empty bucket on the loopback server; its filesystem caches no listings."""
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_server}, skip_instance_cache=True, use_listings_cache=False)
    name = f"traces-{uuid.uuid4().hex[:12]}"
    fs.mkdir(name)
    return Bucket(fs, name)


@pytest.fixture(scope="session")
def example_lake(tmp_path_factory: pytest.TempPathFactory, cpu_traces_dir: Path) -> Path:
    """A local lake of the shipped example traces plus the torch CPU run ``cpu_mlp`` (memory events), via ``tracelake ingest``."""
    from tracelake.ingest import ingest

    root = tmp_path_factory.mktemp("example")
    shutil.copytree(EXAMPLE_TRACES, root / "traces", ignore=shutil.ignore_patterns("*.md"))
    shutil.copytree(cpu_traces_dir / CPU_RUN_ID, root / "traces" / CPU_RUN_ID)
    assert ingest(str(root / "traces"), str(root / "lake"), record=False) == 0
    return root / "lake"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server on loopback for the session (trust auth, user ``tracelake``); skips if not installed."""
    with start_postgres() as server:
        yield server


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's PostgreSQL server, as ``postgresql://tracelake@127.0.0.1:PORT/NAME``."""
    return postgres_server.url(postgres_server.create_database())


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One Redis server on loopback for the session (no persistence); skips if not installed."""
    with start_redis() as server:
        yield server
