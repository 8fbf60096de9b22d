"""Running the real ``tracelake`` command line in a subprocess, so exit codes and output are real."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Completed:
    """A finished command: exit code and output."""

    code: int
    stdout: str
    stderr: str


def tracelake(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Completed:
    """Run ``python -m tracelake.cli ARGS`` from the repository root."""
    done = subprocess.run(
        [sys.executable, "-m", "tracelake.cli", *args],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=timeout, check=False,
    )
    return Completed(done.returncode, done.stdout, done.stderr)


def sql_rows(lake: Path, query: str) -> list[dict]:
    """Rows of a ``tracelake sql --format json`` query (fails the test on a non-zero exit)."""
    done = tracelake("sql", query, "--lake", str(lake), "--format", "json")
    assert done.code == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def cli():
    """The command-line runner, as a fixture for readability."""
    return tracelake
