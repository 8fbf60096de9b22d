"""``tracelake check``: the regression gate for CI. A run's headline metrics against its baseline, what got slower
behind them, and an exit status: 0 when nothing regressed, 1 when a metric regressed beyond the threshold and the
noise, 2 when the run or its baseline cannot be checked."""

from __future__ import annotations

import sys
from typing import Any

import orjson
import polars as pl

from pipelines.lake.read import open_lake
from tracelake.output import print_table
from tracelake.suggest import missing_runs_hint
from transforms.regressions import DEFAULT_MAX_REGRESSION, RunCheck, RunNotChecked, check_run
from transforms.units import format_change, format_ratio, format_value

PASSED, REGRESSED, NOT_CHECKED = 0, 1, 2


def parse_threshold(text: str) -> float:
    """``5%``, ``5`` or ``0.05`` as the ratio 0.05: a number with ``%``, or of 1 or more, is a percentage."""
    number = float(text.strip().removesuffix("%"))
    ratio = number / 100 if text.strip().endswith("%") or number >= 1 else number
    if not 0 <= ratio < 10:
        raise ValueError(f"--max-regression {text!r}: give a percentage such as 5% (or a ratio such as 0.05)")
    return ratio


NAME_WIDTH = 70  # a kernel's name cut to this in the table (tracelake compare and --format json keep it whole)


def _metric_rows(check: RunCheck) -> list[tuple[str, ...]]:
    return [(row["metric"], format_value(row["metric"], row["baseline_value"]), format_value(row["metric"], row["value"]),
             format_change(row["change_ratio"]), "—" if row["noise_ratio"] is None else f"±{100 * row['noise_ratio']:.1f} %",
             "REGRESSION" if row["is_regression"] else "ok")
            for row in check.metrics]


def _baseline_line(check: RunCheck) -> str:
    why = "pinned with --baseline" if check.pinned else "the job's previous run"
    return (f"{check.run_id} against {check.baseline_run_id} ({why}); a regression is a metric worse by more than "
            f"{format_ratio(check.max_regression_ratio)} and by more than the two runs' step-to-step noise")


def _print_table(check: RunCheck) -> None:
    print(_baseline_line(check) if check.baseline_run_id else f"{check.run_id} (job {check.job!r})")
    print_table(["metric", "baseline", "run", "change", "noise", "verdict"], _metric_rows(check), footer=False)
    if check.baseline_run_id and not check.passed and check.behind is not None and check.behind.height:
        print(f"What got slower from {check.baseline_run_id} to {check.run_id}, time per rank-step "
              "(run_comparison; tracelake compare lists it all):")
        name = pl.col("name")
        short = pl.when(name.str.len_chars() > NAME_WIDTH).then(name.str.slice(0, NAME_WIDTH - 1) + "…").otherwise(name)
        behind = check.behind.select("kind", short, baseline_per_step_ns="per_step_a_ns",
                                     run_per_step_ns="per_step_b_ns", slower_per_step_ns="delta_per_step_ns",
                                     change_pct="change_pct")
        print_table(behind.columns, behind.rows(), footer=False)
    print(check.summary())


def _as_json(check: RunCheck) -> dict[str, Any]:
    return {"run_id": check.run_id, "job": check.job, "baseline_run_id": check.baseline_run_id,
            "max_regression_ratio": check.max_regression_ratio, "passed": check.passed,
            "metrics": check.metrics, "behind": check.behind.to_dicts() if check.behind is not None else []}


def run_check(
    run_id: str,
    lake_url: str,
    *,
    baseline: str | None = None,
    max_regression: float = DEFAULT_MAX_REGRESSION,
    metrics: list[str] | None = None,
    options: dict[str, Any] | None = None,
    catalog: str | None = None,
    fmt: str = "table",
) -> int:
    """Print ``run_id``'s verdict against its baseline; returns the exit status (:data:`PASSED`, :data:`REGRESSED`,
    :data:`NOT_CHECKED`)."""
    with open_lake(lake_url, options, catalog=catalog) as con:
        try:
            check = check_run(con, run_id, baseline=baseline, max_regression=max_regression, metrics=metrics)
        except RunNotChecked as exc:
            print(f"tracelake check: {exc}{missing_runs_hint(con, [run_id, baseline])}", file=sys.stderr)
            return NOT_CHECKED
    if fmt == "json":
        sys.stdout.write(orjson.dumps(_as_json(check), default=str, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        _print_table(check)
    return PASSED if check.passed else REGRESSED
