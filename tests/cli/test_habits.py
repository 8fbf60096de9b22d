"""The command line's habits: one default lake for every command, ``--version``, a help page that starts with what
the tool is for and an example, commands in the order a first session uses them."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from tests.cli.conftest import REPO, RUN, tracelake
from tracelake.cli import _parser


def _in(cwd: Path, *args: str, lake_env: str | None = None) -> subprocess.CompletedProcess[str]:
    """``tracelake ARGS`` run from ``cwd`` with ``TRACELAKE_LAKE`` set to ``lake_env`` (unset when None)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TRACELAKE_LAKE", None)
    if lake_env is not None:
        env["TRACELAKE_LAKE"] = lake_env
    return subprocess.run([sys.executable, "-m", "tracelake.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_version_is_the_installed_one() -> None:
    done = tracelake("--version")
    assert done.code == 0 and done.stdout.strip() == f"tracelake {version('tracelake')}"


def test_help_starts_with_the_purpose_and_an_example() -> None:
    done = tracelake("--help")
    lines = done.stdout.split("\n\n")
    assert lines[1].startswith("tracelake: PyTorch profiler (Kineto) traces into a Parquet lake")
    assert lines[2].startswith("example:\n  tracelake ingest ")


def test_commands_are_in_workflow_order() -> None:
    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    order = list(commands.choices)
    assert order[:7] == ["demo", "ingest", "runs", "tables", "sql", "compare", "check"], order


def test_every_lake_option_defaults_to_the_variable_then_dot_lake(tmp_path: Path) -> None:
    parsers = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, parser in parsers.items():
        lake = [a for a in parser._actions if "--lake" in a.option_strings]
        assert lake and not lake[0].required, f"tracelake {name} requires --lake"


def test_runs_finds_the_lake_in_the_variable_and_in_dot_lake(lake: Path, tmp_path: Path) -> None:
    by_variable = _in(tmp_path, "runs", lake_env=str(lake))
    assert by_variable.returncode == 0 and RUN in by_variable.stdout, by_variable.stderr
    lake.rename(tmp_path / "lake")
    by_folder = _in(tmp_path, "runs")
    assert by_folder.returncode == 0 and RUN in by_folder.stdout, by_folder.stderr
    # The option wins over the variable.
    explicit = _in(tmp_path, "runs", "--lake", "lake", lake_env=str(tmp_path / "elsewhere"))
    assert explicit.returncode == 0 and RUN in explicit.stdout, explicit.stderr


def test_no_lake_anywhere_is_one_line(tmp_path: Path) -> None:
    done = _in(tmp_path, "runs")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "does not exist" in done.stderr
