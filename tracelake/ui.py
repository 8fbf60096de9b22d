"""``tracelake ui``: the Dagster UI (``dagster dev``) over the project's definitions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_ui(*, lake_url: str, source_url: str, port: int) -> int:
    """Start ``dagster dev`` with the lake and source set for the resources; returns its exit code.

    DAGSTER_HOME defaults to ``./.dagster``, where ``tracelake demo`` records its runs, so they show in the UI.
    """
    env = dict(os.environ)
    env.setdefault("TRACELAKE_LAKE", os.path.abspath(lake_url) if "://" not in lake_url else lake_url)
    env.setdefault("TRACELAKE_SOURCE", os.path.abspath(source_url) if "://" not in source_url else source_url)
    home = Path(env.setdefault("DAGSTER_HOME", os.path.abspath(".dagster")))
    home.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "dagster", "dev", "-m", "dagster_project.definitions", "-p", str(port), "-h", "127.0.0.1"]
    print(f"Dagster UI at http://127.0.0.1:{port} (lake {env['TRACELAKE_LAKE']}, DAGSTER_HOME {home})", flush=True)
    try:
        return subprocess.call(command, env=env)
    except KeyboardInterrupt:
        return 0
