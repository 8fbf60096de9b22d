"""``--format table`` for people: units kept through aliases and expressions (by the column they are computed from),
``compare`` in percent without e-notation and fitted to the terminal, ``runs`` with a date."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from pipelines.lake.lake import Lake
from pipelines.sources import discover_runs
from tests.cli.conftest import sql_rows, tracelake
from tests.support.servers import EXAMPLE_TRACES
from tracelake.result_units import unit_columns
from transforms.composition.ingest import IngestSettings, ingest_run
from transforms.composition.steps import BuildSettings
from transforms.units import format_ns, format_value

WIDE = {**os.environ, "COLUMNS": "120"}
A, B = "rocm_mi250", "nccl_rank0_of_2"


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of different sizes, so that compare has changes of thousands of percent."""
    source = tmp_path_factory.mktemp("source")
    for run in (A, B):
        shutil.copytree(EXAMPLE_TRACES / run, source / run)
    lake = tmp_path_factory.mktemp("lake")
    for run in discover_runs(str(source)):
        ingest_run(run, Lake(str(lake)), settings=IngestSettings(build=BuildSettings(threads=1), report=False))
    return lake


def test_an_alias_keeps_the_unit_of_its_column(lake: Path) -> None:
    (exact,) = sql_rows(lake, "select avg(dur_ns) as a from kernels")
    done = tracelake("sql", "select avg(dur_ns) a, avg(dur_ns), sum(dur_ns) / 1e6 as ms, count(*) n from kernels",
                     "--lake", str(lake), env=WIDE)
    assert done.code == 0, done.stderr
    shown = format_ns(exact["a"])
    assert re.search(rf"^ *{re.escape(shown)} +{re.escape(shown)} +[\d.]+ +[\d,]+ *$", done.stdout, re.M), done.stdout
    assert "e+" not in done.stdout


@pytest.mark.parametrize(("query", "columns", "expected"), [
    ("select avg(dur_ns) a from kernels", ["a"], ["dur_ns"]),
    ("select max(end_ns - start_ns) span, count(*) n, sum(dur_ns) / 1e6 ms from kernels", ["span", "n", "ms"],
     ["end_ns", "n", "ms"]),
    ("with t as (select sum(size_bytes) s from traces) select s as total from t", ["total"], ["size_bytes"]),
    ("select *, avg(dur_ns) over () w from kernels", ["run_id", "dur_ns", "w"], ["run_id", "dur_ns", "dur_ns"]),
    ("select quantile_cont(dur_ns, 0.5) p50, round(avg(x_ratio), 2) r, cast(min(dur_ns) as bigint) m from t",
     ["p50", "r", "m"], ["dur_ns", "x_ratio", "dur_ns"]),
    ("select a from (select avg(dur_ns) a from kernels) union all select 1", ["a"], ["dur_ns"]),
    ("select coalesce(dur_ns, size_bytes) odd from t", ["odd"], ["odd"]),  # two units: none
    ("explain select 1", ["explain_key", "explain_value"], ["explain_key", "explain_value"]),
])
def test_unit_columns_follow_the_parse_tree(query: str, columns: list[str], expected: list[str]) -> None:
    assert unit_columns(query, columns) == expected


def test_numbers_without_a_unit_are_never_in_e_notation() -> None:
    assert format_value("x", 69438.1) == "69,438"
    assert format_value("x", 0.1234567) == "0.1235"
    assert format_value("change_pct", 4663.0) == "+4,663.0 %"


def test_compare_prints_percent_and_fits_the_terminal(lake: Path) -> None:
    done = tracelake("compare", A, B, "--lake", str(lake), "--limit", "8", env=WIDE)
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 120
    header = next(line for line in lines if line.strip().startswith("kind"))
    # Every header whole; the means give way to 30 characters of name on a terminal this wide.
    assert re.split(r"\s{2,}", header.strip())[:8] == ["kind", "name", "calls A", "calls B", "A per step",
                                                       "B per step", "Δ per step", "change"]
    assert "e+" not in done.stdout and "…" not in header
    assert re.search(r"\+\d{1,3}(,\d{3})*\.\d %", done.stdout), done.stdout


def test_compare_narrow_cuts_names_not_headers(lake: Path) -> None:
    done = tracelake("compare", B, A, "--lake", str(lake), "--limit", "8", env={**WIDE, "COLUMNS": "80"})
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.strip().startswith("kind"))
    assert max(len(line) for line in lines) <= 80 and "…" not in header, done.stdout
    assert "A per step" in header and "change" in header


def test_runs_shows_a_date(lake: Path) -> None:
    done = tracelake("runs", "--lake", str(lake), env=WIDE)
    assert done.code == 0, done.stderr
    assert re.search(r"\bstarted\s+span\s*$", done.stdout, re.M) and "started_ns" not in done.stdout
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC", done.stdout)
