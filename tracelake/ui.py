"""``tracelake ui``: the Dagster UI (``dagster dev``) over the project's definitions."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from dagster_project.home import dagster_home
from pipelines.lake.lake import Lake
from transforms.units import plural

SHUTDOWN_GRACE_S = 20
"""How long ``dagster dev`` may take to stop its webserver, daemon and code server after a stop signal before they
are killed (seen: still up 60 s after its daemon had shut down, on a loaded machine)."""


def _local(url: str) -> str:
    return url if "://" in url else os.path.abspath(url)


def _post_records(lake: Lake, home: Path) -> None:
    """Post what ingests into ``lake`` recorded since the UI last ran, a line per batch (the code location's sensor
    posts what comes later)."""
    from dagster_project.record import open_instance, post_records  # Dagster's import and instance: ~1.5 s

    with open_instance(home) as instance:
        for runs in post_records(instance, lake):
            print(f"posted {plural(len(runs), 'run')} of {lake.url} to the Dagster home {home}: "
                  f"{', '.join(runs[:10])}{' …' if len(runs) > 10 else ''}", flush=True)


def run_ui(*, lake_url: str | None, source_url: str | None, host: str, port: int, catalog: str | None = None) -> int:
    """Run ``dagster dev`` until Ctrl-C or SIGTERM, then stop it and every process it started; returns its exit code.

    ``--lake``/``--source``/``--catalog`` win over ``TRACELAKE_LAKE``/``TRACELAKE_SOURCE``/``TRACELAKE_CATALOG``;
    the instance home is the lake's, where ``tracelake ingest`` records it (:func:`dagster_project.home.dagster_home`),
    passed to ``dagster dev`` alone, so the lake's ingested runs show, and only they.
    """
    env = dict(os.environ)
    env["TRACELAKE_LAKE"] = _local(lake_url or env.get("TRACELAKE_LAKE") or "lake")
    env["TRACELAKE_SOURCE"] = _local(source_url or env.get("TRACELAKE_SOURCE") or "demo-traces")
    if catalog:
        env["TRACELAKE_CATALOG"] = catalog
    lake = Lake(env["TRACELAKE_LAKE"], None, env.get("TRACELAKE_CATALOG") or None)
    home = dagster_home(lake)
    env["DAGSTER_HOME"] = str(home)
    _post_records(lake, home)
    command = [sys.executable, "-m", "dagster", "dev", "-m", "dagster_project.definitions", "-h", host, "-p", str(port)]
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    print(f"Dagster UI at http://{shown}:{port} (lake {env['TRACELAKE_LAKE']}, DAGSTER_HOME {env['DAGSTER_HOME']}); "
          "Ctrl-C stops it", flush=True)
    # Its own process group: a stop signal reaches dagster dev, its webserver and its code server alike.
    process = subprocess.Popen(command, env=env, start_new_session=True)

    stopped_at: list[float] = []  # when the first stop signal came

    def stop(signum: int, _frame: FrameType | None) -> None:
        stopped_at.append(time.monotonic())
        os.killpg(process.pid, signal.SIGINT)  # dagster dev shuts its children down on SIGINT

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = _wait_for(process, stopped_at)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # whatever outlived the shutdown
        return 0 if stopped_at or code in (0, -signal.SIGINT, 130) else code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait_for(process: subprocess.Popen[bytes], stopped_at: list[float]) -> int:
    """``process``'s exit code; once a stop signal came (``stopped_at``), its process group gets
    :data:`SHUTDOWN_GRACE_S` to exit, then is killed."""
    while True:
        try:
            return process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            if stopped_at and time.monotonic() - stopped_at[0] > SHUTDOWN_GRACE_S:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
