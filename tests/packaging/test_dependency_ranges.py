"""The wheel declares ranges, not pins: pip installs it beside the newest release of every runtime dependency the
registry serves (a notebook's own polars, pyarrow or dagster) without downgrading any, while `make` installs the
exact tested set of constraints.txt. Only DuckDB and its extensions stay exact: each extension wheel is built for
one DuckDB version."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.servers import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXACT = {"duckdb", "duckdb-extension-ducklake", "duckdb-extension-httpfs", "duckdb-extension-postgres",
         "duckdb-extension-sqlite"}
RUNTIME = [Requirement(text) for text in (*PROJECT["dependencies"], *PROJECT["optional-dependencies"]["fleet"])]


def _tested() -> dict[str, str]:
    """constraints.txt: the exact set tested."""
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return {canonicalize_name(name): version
            for name, version in (line.split("==", 1) for line in lines if "==" in line and not line.startswith("#"))}


def test_runtime_dependencies_are_ranges_with_the_tested_versions_as_floors() -> None:
    tested = _tested()
    for requirement in RUNTIME:
        name = canonicalize_name(requirement.name)
        pinned = [spec for spec in requirement.specifier if spec.operator == "=="]
        assert bool(pinned) == (name in EXACT), f"{requirement}: only DuckDB's family is pinned"
        assert requirement.specifier.contains(tested[name]), f"{requirement} excludes the tested {tested[name]}"
        if name not in EXACT:
            assert any(spec.operator == ">=" and spec.version == tested[name] for spec in requirement.specifier), (
                f"{requirement}: the tested version {tested[name]} is its floor")


def _newest(name: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name], capture_output=True, text=True,
                          check=True, timeout=300)
    match = re.match(rf"{re.escape(name)} \(([^)]+)\)", done.stdout.strip(), re.IGNORECASE)
    assert match, done.stdout
    return match[1]


@pytest.mark.slow
def test_the_wheel_installs_beside_the_newest_releases_without_downgrading(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(tmp_path),
                    str(ROOT)], check=True, capture_output=True, timeout=600)
    (wheel,) = tmp_path.glob("tracelake-*.whl")
    newest = {}
    for requirement in map(Requirement, PROJECT["dependencies"]):  # a notebook installs the plain wheel
        name = canonicalize_name(requirement.name)
        if name in EXACT or name.startswith("dagster"):
            continue  # DuckDB's family; Dagster's, whose newest releases need not match each other (below)
        version = _newest(name)
        if requirement.specifier.contains(version, prereleases=False):  # else past a declared bound (a new major)
            newest[name] = version
    assert {"polars", "pyarrow", "fsspec", "s3fs"} <= set(newest), newest
    report = tmp_path / "report.json"
    dagster = _tested()["dagster"]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report",
         str(report), str(wheel), *(f"{name}=={version}" for name, version in newest.items()),
         f"dagster>{dagster}"],  # a newer Dagster family than the tested one, as a notebook may hold
        capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    chosen = {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
              for item in json.loads(report.read_text())["install"]}
    assert {name: chosen[name] for name in newest} == newest
    assert chosen["dagster"] != dagster
