"""The regression gate: a run's headline metrics against its baseline, as ``run_regressions`` says, read over the
run's job alone, and what got slower behind them (``run_comparison``).

``tracelake check --metric straggler_recurrence_ratio`` adds the persistent-straggler gate: not a change against the
baseline but a state of the run itself, a rank that ``stragglers`` calls the straggler and finds the culprit of half
its steps or more (``is_recurring``), which fails the check whatever the baseline did.

``tracelake check`` prints it and Dagster's ``no_regression`` check of ``marts/run_metrics`` reports it; both call
:func:`check_run`, which sets the view's DuckDB variables (threshold, pinned baseline) and reads the view itself, so
the gate and the fleet view never disagree. Only the job's rows are read: the run's job from its own file (one
indexed catalog query), the job's ``run_metrics`` rows once, filtered on the range of run_ids its runs share (``JOB``
and ``JOB.*``, a filter DuckLake prunes every other run's file by) into a temporary table that the view reads in the
table's place, and the comparison from the two runs' own files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb

from pipelines.lake.fleet_views import read_current_fleet_views
from pipelines.lake.lake import ALIAS
from pipelines.lake.run_scope import scope_to_run
from pipelines.rows import sql_path
from transforms.units import format_change

if TYPE_CHECKING:  # polars is imported on use: an ingest's verdict (top=0) never looks behind it
    import polars as pl

DEFAULT_MAX_REGRESSION = 0.05
BEHIND_KINDS = ("kernel", "op", "collective")  # what a slower step is made of, from run_comparison
TOP_BEHIND = 5  # rows of each kind shown behind a regression
_METRICS_TABLE = f"{ALIAS}.marts.run_metrics"
STRAGGLER_METRIC = "straggler_recurrence_ratio"  # asked for by name only: a gate on the run, not on a change


class RunNotChecked(LookupError):
    """The run or its baseline is not in the lake, or has no headline metrics to compare."""


@dataclass(frozen=True)
class RunCheck:
    """A run's verdict: each headline metric against the baseline (``run_regressions`` rows), and behind them."""

    run_id: str
    job: str
    baseline_run_id: str | None
    pinned: bool
    max_regression_ratio: float
    metrics: list[dict[str, Any]]
    """The run's ``run_regressions`` rows (the metrics asked for), worst change first."""
    behind: pl.DataFrame | None = None
    """``run_comparison`` rows that got slower (kernels, ops, collectives), the largest of each kind first; None where
    not looked up (no baseline, or ``top=0``)."""

    @property
    def regressions(self) -> list[dict[str, Any]]:
        """The metrics beyond the threshold and the noise."""
        return [row for row in self.metrics if row["is_regression"]]

    @property
    def passed(self) -> bool:
        """No metric regressed."""
        return not self.regressions

    def summary(self) -> str:
        """The verdict in one line."""
        if not self.passed:
            worst = ", ".join(_why(row) for row in self.regressions)
            against = f" against {self.baseline_run_id}" if self.baseline_run_id else ""
            return f"FAILED: {self.run_id} regressed{against} on {worst}"
        if self.baseline_run_id is None:
            return (f"passed: {self.run_id} is the first run of job {self.job!r}, so there is nothing to compare it "
                    "with (pin a baseline with --baseline RUN)")
        return f"passed: no metric of {self.run_id} regressed against {self.baseline_run_id}"


def _why(row: dict[str, Any]) -> str:
    """A failed metric in a few words: its change and noise, or the straggler gate's finding."""
    if row.get("finding"):
        return f"{row['metric']} ({row['finding']})"
    return f"{row['metric']} ({format_change(row['change_ratio'])}, noise ±{100 * row['noise_ratio']:.1f} %)"


def _recurrence(con: duckdb.DuckDBPyConnection, run_id: str) -> tuple[float | None, str | None]:
    """The run's highest recurrence_ratio among its ranks, and, where a rank is a persistent straggler (the
    straggler, and the culprit of half its steps or more), what to say of it."""
    try:
        row = con.execute(
            "select max(recurrence_ratio), arg_max("
            "  format('rank {} is the culprit at {} of {} steps{}', rank, culprit_steps, steps,"
            "         coalesce(' (' || cause || ')', '')), recurrence_ratio) filter (where is_straggler and is_recurring) "
            f"from {ALIAS}.marts.stragglers where run_id = $run",
            {"run": run_id},
        ).fetchone()
    except duckdb.BinderException:  # a lake written before stragglers had recurrence_ratio
        raise RunNotChecked(f"run {run_id!r} has no per-step straggler columns: ingest it again") from None
    except duckdb.CatalogException:  # no stragglers table: no run of the lake had collectives to compare
        return None, None
    return (row[0], row[1]) if row else (None, None)


def _straggler_row(
    con: duckdb.DuckDBPyConnection, run_id: str, job: str, baseline_run_id: str | None, max_regression: float
) -> dict[str, Any]:
    """The persistent-straggler gate as a row like run_regressions': value the run's highest recurrence_ratio,
    is_regression where some rank is a persistent straggler (stragglers.is_straggler and is_recurring)."""
    value, finding = _recurrence(con, run_id)
    baseline_value = _recurrence(con, baseline_run_id)[0] if baseline_run_id else None
    change = (value - baseline_value) / baseline_value if value is not None and baseline_value else None
    return {"run_id": run_id, "metric": STRAGGLER_METRIC, "job": job, "started_ns": None,
            "baseline_run_id": baseline_run_id, "value": value, "baseline_value": baseline_value,
            "change_ratio": change, "noise_ratio": None, "is_regression": finding is not None,
            "higher_is_worse": True, "max_regression_ratio": max_regression, "finding": finding}


def job_range(job: str) -> tuple[str, str]:
    """[low, high) of the run_ids that may belong to ``job``: the job's own id (a run folder straight under SOURCE is
    its own job) and ``job.*``, and between them only ids of other jobs, which the job column then leaves out."""
    return job, job + "/"  # '/' is the character after '.', and never in a run_id


def _job_of(con: duckdb.DuckDBPyConnection, run_id: str, role: str) -> str:
    """The job of ``run_id``, from its own run_metrics file (found by one indexed catalog query)."""
    try:
        scope_to_run(con, run_id, ["run_metrics"])
    except LookupError:
        raise RunNotChecked(f"{role} {run_id!r} is not in the lake (tracelake runs lists the runs)") from None
    try:
        row = con.execute("select any_value(job) from run_metrics").fetchone()
    except duckdb.CatalogException:  # no run_metrics table: every run was ingested before it existed
        row = None
    if row is None or row[0] is None:
        raise RunNotChecked(f"{role} {run_id!r} has no run_metrics rows (its analysis failed, or it was ingested "
                            "before run_metrics existed: ingest it again)")
    return str(row[0])


def scope_to_job(con: duckdb.DuckDBPyConnection, job: str, also: str | None = None) -> None:
    """Make ``run_metrics`` on ``con`` hold only ``job``'s runs (and run ``also``, a pinned baseline of another job),
    read once into a temporary table, so that ``run_regressions`` reads nothing else."""
    low, high, this = (sql_path(text) for text in (*job_range(job), job))
    extra = f" union all select * from {_METRICS_TABLE} where run_id = {sql_path(also)} and job != {this}" if also else ""
    con.execute("create or replace temp table job_metrics as "
                f"select * from {_METRICS_TABLE} where run_id >= {low} and run_id < {high} and job = {this}{extra}")
    con.execute("create or replace temp view run_metrics as select * from job_metrics")


def _behind(con: duckdb.DuckDBPyConnection, baseline: str, run_id: str, top: int) -> pl.DataFrame:
    """What got slower from ``baseline`` to ``run_id``: the ``top`` largest slowdowns of each kind in
    :data:`BEHIND_KINDS`, largest first."""
    import polars as pl

    from transforms.compare import compare_runs

    table = compare_runs(con, baseline, run_id)
    slower = table.filter(pl.col("kind").is_in(BEHIND_KINDS) & (pl.col("delta_per_step_ns") > 0))
    return (slower.sort("delta_per_step_ns", descending=True).group_by("kind", maintain_order=True).head(top)
            .sort("delta_per_step_ns", descending=True))


def check_run(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    *,
    baseline: str | None = None,
    max_regression: float = DEFAULT_MAX_REGRESSION,
    metrics: Sequence[str] | None = None,
    top: int = TOP_BEHIND,
) -> RunCheck:
    """``run_id``'s headline metrics against ``baseline`` (default: its job's previous run) on ``con``, a reading
    connection (:func:`pipelines.lake.read.open_lake`), with what got slower behind them (the ``top`` largest of each
    kind; 0: not looked up). ``metrics`` limits the verdict to those metrics; ``max_regression`` is the threshold, a
    ratio. Leaves ``con`` scoped to the job.

    Raises:
        RunNotChecked: the run or the baseline is not in the lake or has no headline metrics, or a metric named in
            ``metrics`` is not one of the run's.
    """
    job = _job_of(con, run_id, "run")
    if baseline is not None:
        _job_of(con, baseline, "baseline")
    con.execute("set variable tracelake_max_regression = $ratio", {"ratio": float(max_regression)})
    con.execute("set variable tracelake_baselines = map($jobs, $runs)",
                {"jobs": [job] if baseline else [], "runs": [baseline] if baseline else []})
    scope_to_job(con, job, baseline)
    read_current_fleet_views(con, ALIAS)
    cursor = con.execute("select * from run_regressions where run_id = $run", {"run": run_id})
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    gate_stragglers = STRAGGLER_METRIC in (metrics or [])
    compared_with = rows[0]["baseline_run_id"] if rows else baseline
    asked = [metric for metric in metrics or [] if metric != STRAGGLER_METRIC]
    if asked:
        unknown = sorted(set(asked) - {row["metric"] for row in rows})
        if unknown:
            raise RunNotChecked(f"run {run_id!r} has no metric {', '.join(map(repr, unknown))}; its metrics: "
                                f"{', '.join(sorted(row['metric'] for row in rows))}, {STRAGGLER_METRIC}")
    if metrics:
        rows = [row for row in rows if row["metric"] in asked]
    if gate_stragglers:
        rows.append(_straggler_row(con, run_id, job, compared_with, max_regression))

    def worse(row: dict[str, Any]) -> float:
        change = row["change_ratio"] or 0.0
        return change if row["higher_is_worse"] else -change

    rows.sort(key=lambda row: (-worse(row), row["metric"]))
    chosen = compared_with
    behind = _behind(con, chosen, run_id, top) if chosen and top else None
    return RunCheck(run_id, job, chosen, baseline is not None, max_regression, rows, behind)
