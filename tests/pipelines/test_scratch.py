"""Scratch folders carry their process id; a killed ingest's are swept by the next one, a live process's never."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipelines.scratch import PREFIX, scratch_dir, sweep_dead_scratch


def test_folders_of_dead_processes_are_swept_and_live_ones_kept(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leftover = tmp_path / f"{PREFIX}{dead.stdout.strip()}-parse-abc"
    (leftover / "parts").mkdir(parents=True)
    (leftover / "parts" / "chunk.parquet").write_bytes(b"x" * 1024)
    unrelated = tmp_path / "tracelake-notes"
    unrelated.mkdir()
    with scratch_dir("parse") as mine:
        assert mine.name.startswith(f"{PREFIX}{os.getpid()}-parse-")
        assert sweep_dead_scratch(str(tmp_path)) == [leftover]
        assert mine.exists() and unrelated.exists() and not leftover.exists()
    assert not mine.exists()


def test_an_ingest_sweeps_a_killed_ingests_scratch(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leftover = tmp_path / f"{PREFIX}{dead.stdout.strip()}-marts-xyz"
    (leftover / "spill").mkdir(parents=True)
    source = Path(__file__).resolve().parents[2] / "examples" / "traces" / "rocm_mi250"
    done = subprocess.run([sys.executable, "-m", "tracelake.cli", "ingest", str(source), "--lake", str(tmp_path / "lake")],
                          capture_output=True, text=True, env={**os.environ, "TMPDIR": str(tmp_path)}, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"removed {leftover}" in done.stdout and not leftover.exists()
    assert not [p for p in tmp_path.glob(f"{PREFIX}*") if p.is_dir()]  # and the ingest left none of its own
