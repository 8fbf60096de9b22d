"""A tracelake fleet on loopback, as deploy/ describes it: a code location server, the Dagster daemon and webserver
with PostgreSQL storage, and Celery workers with a Redis broker, each a process of the installed package started
from a working directory of its own. They share nothing but the servers: PostgreSQL (Dagster's storage), Redis
(Celery) and S3 (traces, lake, step outputs).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from tests.support.databases import PostgresServer, RedisServer
from tests.support.installed import InstalledVenv
from tests.support.s3 import S3Server
from tests.support.servers import ROOT, free_port, process_group, wait_for, wait_for_http

CODE_LOCATION = "dagster_project.fleet"
SENSOR = "trace_runs_sensor"
# The tag the celery task puts on its "Executing steps ... in celery worker" engine event.
WORKER_METADATA = "Celery worker"


@dataclass
class Fleet:
    """The running fleet: its processes by name, its Dagster instance, and the webserver's GraphQL endpoint."""

    root: Path
    venv: InstalledVenv
    env: dict[str, str]
    graphql_url: str
    instance: dg.DagsterInstance
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def kill(self, name: str) -> None:
        """SIGKILL the process group of ``name`` (a worker's dagster-celery, celery and pool processes): no
        warm shutdown, no goodbye to the broker, as when its machine is lost."""
        os.killpg(self.processes[name].pid, signal.SIGKILL)
        self.processes[name].wait(timeout=30)

    def graphql(self, query: str, **variables: object) -> dict:
        """One GraphQL request to the webserver, as the UI sends it."""
        body = json.dumps({"query": query, "variables": variables}).encode()
        request = urllib.request.Request(self.graphql_url, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.load(response)
        assert "errors" not in answer, answer
        return answer["data"]

    def log(self, name: str) -> str:
        return (self.root / name / "process.log").read_text(errors="replace")[-4000:]


def worker_hostname(name: str) -> str:
    """The Celery node name ``dagster-celery worker start -n NAME`` gives a worker on this machine."""
    return f"{name}@{socket.gethostname()}"


def _dagster_home(folder: Path, env: dict[str, str]) -> dict[str, str]:
    """A DAGSTER_HOME in ``folder`` with the deployment's instance file: deploy/dagster.yaml + PostgreSQL storage."""
    folder.mkdir(parents=True)
    yaml = (ROOT / "deploy" / "dagster.yaml").read_text() + (ROOT / "deploy" / "dagster-postgres.yaml").read_text()
    (folder / "dagster.yaml").write_text(yaml)
    return {**env, "DAGSTER_HOME": str(folder)}


@contextmanager
def run_fleet(
    root: Path,
    venv: InstalledVenv,
    *,
    postgres: PostgresServer,
    redis: RedisServer,
    s3: S3Server,
    lake_env: dict[str, str],
    source: str,
    workers: tuple[str, ...],
) -> Iterator[Fleet]:
    """Start the fleet under ``root`` (one folder per process) and stop every process by its group id on exit."""
    dagster_db = postgres.create_database("dagster")
    buckets = {"TRACELAKE_STEP_IO": "s3://fleet-steps/dagster"}
    s3.make_bucket("fleet-steps")
    base = venv.env(
        **s3.env(),
        **lake_env,
        **buckets,
        DAGSTER_PG_URL=postgres.url(dagster_db, driver="psycopg2"),
        TRACELAKE_SOURCE=source,
        TRACELAKE_CELERY_BROKER=redis.url(0),
        TRACELAKE_CELERY_BACKEND=redis.url(1),
        TRACELAKE_SENSOR_INTERVAL_S="2",
        TRACELAKE_FULL_PASS_EVERY="2",
    )
    code_port, web_port = free_port(), free_port()
    workspace = root / "workspace.yaml"
    root.mkdir(parents=True, exist_ok=True)
    workspace.write_text(
        f"load_from:\n  - grpc_server:\n      host: 127.0.0.1\n      port: {code_port}\n"
        f"      location_name: {CODE_LOCATION}\n"
    )
    commands = {
        "code": [venv.bin("dagster"), "api", "grpc", "-m", CODE_LOCATION, "-h", "127.0.0.1", "-p", str(code_port)],
        "daemon": [venv.bin("dagster-daemon"), "run", "-w", str(workspace)],
        "webserver": [venv.bin("dagster-webserver"), "-w", str(workspace), "-h", "127.0.0.1", "-p", str(web_port)],
    }
    for name in workers:
        shutil.copy(ROOT / "deploy" / "celery.yaml", root / f"{name}.celery.yaml")
        commands[name] = [
            venv.bin("dagster-celery"), "worker", "start", "-A", "dagster_celery.app", "-n", name,
            "-y", str(root / f"{name}.celery.yaml"), "--", "--concurrency=1",
        ]
    envs = {name: _dagster_home(root / name / "home", base) for name in commands}
    with ExitStack() as stack:
        processes = {}
        for name, command in commands.items():
            processes[name] = stack.enter_context(
                process_group(command, env=envs[name], log=root / name / "process.log", cwd=root / name)
            )
            if name == "code":
                _wait_for_grpc(venv, code_port, envs[name], processes[name], root / name / "process.log")
        wait_for_http(f"http://127.0.0.1:{web_port}/server_info", timeout=120)
        subprocess.run([venv.bin("dagster"), "sensor", "start", SENSOR, "-w", str(workspace)],
                       env=envs["daemon"], cwd=root / "daemon", check=True, capture_output=True, timeout=120)
        with _environ(DAGSTER_PG_URL=base["DAGSTER_PG_URL"]):  # read when the instance file is loaded
            instance = stack.enter_context(dg.DagsterInstance.from_config(str(root / "daemon" / "home")))
        yield Fleet(root, venv, base, f"http://127.0.0.1:{web_port}/graphql", instance, processes)


@contextmanager
def _environ(**values: str) -> Iterator[None]:
    """Set environment variables of this process for the duration of the block."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _wait_for_grpc(
    venv: InstalledVenv, port: int, env: dict[str, str], server: subprocess.Popen[bytes], log: Path
) -> None:
    """Wait until the code location server answers (``dagster api grpc-health-check``); fail if it exits."""
    check = [venv.bin("dagster"), "api", "grpc-health-check", "--host", "127.0.0.1", "--port", str(port)]

    def up() -> bool:
        if server.poll() is not None:
            raise AssertionError(f"the code location server exited:\n{log.read_text()[-3000:]}")
        return subprocess.run(check, env=env, capture_output=True).returncode == 0

    wait_for(up, timeout=120, interval=1, what="the code location server")
