"""``tracelake compare``: the run_comparison table of two runs, printed and optionally saved."""

from __future__ import annotations

import shutil
import sys
from typing import Any

import polars as pl

from pipelines.lake.read import open_lake
from tracelake.output import print_table, write_result
from tracelake.suggest import missing_runs_hint
from transforms.compare import compare_runs
from transforms.units import format_value


def run_compare(
    run_a: str,
    run_b: str,
    lake_url: str,
    *,
    options: dict[str, Any] | None = None,
    catalog: str | None = None,
    kinds: list[str] | None = None,
    limit: int = 30,
    fmt: str = "table",
    out: str | None = None,
) -> int:
    """Print what got slower from ``run_a`` to ``run_b`` (largest slowdown per rank-step first); returns the exit code."""
    con = open_lake(lake_url, options, catalog=catalog)
    try:
        table = compare_runs(con, run_a, run_b)
    except ValueError as exc:
        print(f"tracelake compare: {exc}{missing_runs_hint(con, [run_a, run_b])}", file=sys.stderr)
        return 2
    if out:
        table.write_parquet(out)
    shown = table.filter(pl.col("kind").is_in(kinds)) if kinds else table
    shown = shown.head(limit) if limit else shown
    if fmt == "table":
        _print_fitted(shown)
    else:
        write_result(shown.columns, shown.rows(), fmt)
    return 0


HEADERS = {"calls_a": "calls A", "calls_b": "calls B", "per_step_a_ns": "A per step", "per_step_b_ns": "B per step",
           "delta_per_step_ns": "Δ per step", "change_pct": "change", "mean_a_ns": "mean A", "mean_b_ns": "mean B"}
"""The table's headers for people (csv, json and --out keep the run_comparison columns)."""
DROPPED_FIRST = (("mean_a_ns", "mean_b_ns"), ("calls_a", "calls_b"))
"""Columns left out, in this order, of a terminal too narrow for them and a name of :data:`MIN_NAME` characters."""
MIN_NAME = 30


def _print_fitted(shown: pl.DataFrame) -> None:
    """The comparison fitted to the terminal: every number whole, the name cut to the width left (one line each)."""
    width = shutil.get_terminal_size((120, 24)).columns
    columns = list(shown.columns)
    name = min(MIN_NAME, max([4, *(len(n) for n in shown["name"])]))
    for group in DROPPED_FIRST:
        others = sum(max([len(HEADERS.get(c, c)), *(len(format_value(c, v)) for v in shown[c])]) + 2
                     for c in columns if c != "name")
        if width - others >= name:
            break
        columns = [c for c in columns if c not in group]
    rows = shown.select(columns).rows()
    print_table([HEADERS.get(c, c) for c in columns], rows, units=columns, one_line=("name",))
