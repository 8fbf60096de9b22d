"""The README's first command, as a newcomer runs it: ``tracelake demo`` through the installed console script
(torch profiles real jobs in the command's own process, then everything is ingested and recorded)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.lake.read import open_lake

pytestmark = pytest.mark.slow


def test_the_demo_runs_through_the_console_script(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "tracelake"
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster")}
    done = subprocess.run([str(script), "demo", "--lake", str(tmp_path / "lake"), "--traces", str(tmp_path / "traces")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr
    assert "recorded" in done.stdout and "tracelake ui --lake" in done.stdout
    runs = {row[0] for row in open_lake(str(tmp_path / "lake")).execute("select run_id from runs").fetchall()}
    assert {"cpu_mlp", "cpu_vit", "gloo_ddp", "nccl_rank0_of_2", "rocm_mi250", "simple_add"} <= runs
