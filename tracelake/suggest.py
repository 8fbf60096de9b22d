""""Did you mean": the closest known names to a mistyped table or run, for one-line errors."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

import duckdb


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` did you mean 'kernel_stats'?`` (up to three close names, best first), or nothing when none is close."""
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def missing_runs_hint(
    con: duckdb.DuckDBPyConnection, names: Iterable[str | None], runs: str = "select run_id from runs"
) -> str:
    """A "did you mean" for each of ``names`` that is not a run of the lake behind ``con`` (``runs`` lists them)."""
    try:
        known = [run for (run,) in con.execute(runs).fetchall()]
    except duckdb.Error:  # a lake with no run yet: its error says so already
        return ""
    return "".join(did_you_mean(name, known) for name in names if name and name not in known)
