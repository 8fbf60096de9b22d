"""Running the real ``tracelake`` command line in a subprocess, so exit codes and output are real."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipelines.lake.lake import Lake
from pipelines.sources import discover_runs
from tests.support.servers import EXAMPLE_TRACES
from transforms.composition.ingest import IngestSettings, ingest_run
from transforms.composition.steps import BuildSettings

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


RUN = "job"
"""The run of :func:`source`."""


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A source whose one run ``job`` holds the example run simple_add's trace."""
    root = tmp_path_factory.mktemp("source")
    (root / RUN).mkdir()
    for trace in (EXAMPLE_TRACES / "simple_add").glob("*.json.gz"):
        shutil.copy(trace, root / RUN / trace.name)
    return root


@pytest.fixture
def lake(tmp_path: Path, source: Path) -> Path:
    """A lake holding run ``job``, made where the test uses it (no report, one thread)."""
    lake = tmp_path / "lake"
    (run,) = discover_runs(str(source))
    ingest_run(run, Lake(str(lake)), settings=IngestSettings(build=BuildSettings(threads=1), report=False))
    return lake
