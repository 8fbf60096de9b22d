"""``tracelake compare``: the run_comparison table of two runs, printed and optionally saved."""

from __future__ import annotations

import sys
from typing import Any

import polars as pl

from pipelines.lake.read import open_lake
from tracelake.output import write_result
from tracelake.suggest import missing_runs_hint
from transforms.compare import compare_runs


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
    write_result(shown.columns, shown.rows(), fmt)
    return 0
