"""A newcomer's path: the README's first-steps commands run as written (from a copy of the project root), every
command's help explains every option, and the mistakes a newcomer makes get a clear line."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import ROOT
from tracelake.cli import _parser
from transforms.docs import GUIDE, all_docs

pytestmark = pytest.mark.slow


def _first_steps() -> list[list[str]]:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```console\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line.removeprefix("$ ")) for line in block.splitlines() if line.startswith("$ tracelake ")]


def _tracelake(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracelake.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_readme_first_steps_run_as_written(tmp_path):
    steps = _first_steps()
    assert [s[1] for s in steps] == ["ingest", "runs", "tables", "tables", "sql", "compare"]
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path / "home"), "COLUMNS": "120"}
    env.pop("DAGSTER_HOME")
    out = {}
    for step in steps:
        done = _tracelake(step[1:], tmp_path, env)
        assert done.returncode == 0, f"{shlex.join(step)}:\n{done.stdout}{done.stderr}"
        out[" ".join(step[1:3])] = done.stdout
    ingest = out["ingest examples/traces"]
    assert re.search(r"^ingested 3 runs into lake in [\d.]+ s: ok$", ingest, re.MULTILINE), ingest
    assert f"reports: {tmp_path / 'lake' / 'reports' / 'index.html'}" in ingest
    assert (tmp_path / "lake" / "reports" / "nccl_rank0_of_2.html").exists()

    runs = out["runs --lake"]
    assert all(run in runs for run in ("nccl_rank0_of_2", "rocm_mi250", "simple_add")) and "(3 rows)" in runs
    assert "NVIDIA A100-PG509-200" in runs and "UTC" in runs and "None" not in runs
    assert max(len(line) for line in runs.splitlines()) <= 120  # fitted to the terminal

    tables = out["tables"]
    assert GUIDE.splitlines()[0] in tables and "step_breakdown.communication_ns" in tables
    assert GUIDE in (ROOT / "sql" / "TABLES.md").read_text()  # the table reference's guide is this one, word for word
    for name in all_docs():
        assert re.search(rf"^ {name}\s", tables, re.M), name

    columns = out["tables step_breakdown"]
    assert re.search(r"communication_ns\s+ns\s+step time whose top activity was communication", columns)

    sql = out["sql " + steps[4][2]]
    assert re.search(r"nccl_rank0_of_2\s+0\s+4\s+22\d ms", sql), sql  # human units, not raw ns
    assert "(6 rows)" in sql
    assert "(5 rows)" in out["compare rocm_mi250"]


def test_every_option_of_every_command_has_help():
    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert {"ingest", "sql", "runs", "tables", "compare", "ui", "demo"} <= set(commands.choices)
    assert all(choice.help for choice in commands._choices_actions)  # each command's line in `tracelake --help`
    for name, parser in commands.choices.items():
        for action in parser._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help, f"tracelake {name} {action.option_strings or action.dest} has no help"
        parser.format_help()  # renders: a stray % in a help text would raise here


def test_newcomer_mistakes_get_one_clear_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    (tmp_path / "empty").mkdir()
    not_a_lake = _tracelake(["runs", "--lake", str(tmp_path / "empty")], tmp_path, env)
    assert not_a_lake.returncode == 2
    assert not_a_lake.stderr.strip() == (f"tracelake runs: {tmp_path / 'empty'} holds no tracelake lake (nothing was "
                                         f"ingested there): run tracelake ingest SOURCE --lake {tmp_path / 'empty'} "
                                         "first, or point --lake at the lake")
    for args in (["sql", "select 1"], ["compare", "a", "b"]):
        done = _tracelake([*args, "--lake", str(tmp_path / "missing")], tmp_path, env)
        assert done.returncode == 2 and "does not exist" in done.stderr and "Traceback" not in done.stderr

    empty_source = _tracelake(["ingest", str(tmp_path / "empty"), "--lake", str(tmp_path / "lake")], tmp_path, env)
    assert empty_source.returncode == 1
    assert "WARNING no trace files" in empty_source.stdout and "ok" not in empty_source.stdout.split()
