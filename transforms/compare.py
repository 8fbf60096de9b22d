"""Run comparison: which kernels, ops, collectives and step phases got slower from run A to run B."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl

from pipelines.lake.read import table_names
from pipelines.lake.run_scope import scope_to_run
from transforms.models import default_sql_root

# NCCL kernels of older traces carry no collective args; their names say which collective they run.
_IS_COLLECTIVE = "collective_name is not null or name like 'nccl%Kernel_%'"

# What each kind of item is, as (name, dur_ns) rows of one lake view; a part whose view the
# lake lacks (a mart not built yet) is left out.
ITEM_SOURCES: dict[str, tuple[str, str]] = {
    "kernel": ("kernels", f"select run_id, name, dur_ns from kernels where not ({_IS_COLLECTIVE})"),
    "collective": (
        "kernels",
        "select run_id, coalesce(collective_name, regexp_extract(name, '^nccl(?:Dev)?Kernel_([A-Za-z]+)', 1)) as name, "
        f"dur_ns from kernels where {_IS_COLLECTIVE}",
    ),
    "op": ("cpu_ops", "select run_id, name, dur_ns from cpu_ops"),
    "step": ("steps", "select run_id, 'ProfilerStep' as name, dur_ns from steps"),
    "phase": (
        "step_breakdown",
        "select run_id, phase as name, dur_ns from step_breakdown unpivot (dur_ns for phase in "
        "(kernel_ns, memcpy_ns, memset_ns, communication_ns, runtime_ns, dataloader_ns, cpu_exec_ns, other_ns))",
    ),
}


SCOPED_TABLES = sorted({view for view, _ in ITEM_SOURCES.values()})


def comparison_sql(sql_root: Path | None = None) -> str:
    """The comparison query (``sql/queries/run_comparison.sql``), with ``$run_a`` and ``$run_b`` parameters."""
    return ((sql_root or default_sql_root()) / "queries" / "run_comparison.sql").read_text()


def compare_runs(con: duckdb.DuckDBPyConnection, run_a: str, run_b: str) -> pl.DataFrame:
    """The ``run_comparison`` table of ``run_b`` against ``run_a`` over a connection from ``open_lake``.

    Each run's rows are read from its own files, found by one indexed query on the catalog
    (:func:`pipelines.lake.run_scope.scope_to_run`), never by a scan that lists every run's files: a comparison costs
    the same in a lake of 10,000 runs as of 10. The two runs' items land in temporary tables of ``con``
    (``comparison_items``, ``compared_steps``), and its bare names stay scoped to ``run_b``.

    Raises:
        ValueError: when either run is not in the lake.
    """
    con.execute("create or replace temp table comparison_items (kind varchar, name varchar, run_id varchar, "
                "dur_ns bigint)")
    con.execute("create or replace temp table compared_steps (run_id varchar)")
    missing = []
    for run in dict.fromkeys((run_a, run_b)):
        try:
            scope_to_run(con, run, SCOPED_TABLES)
        except LookupError:
            missing.append(run)
            continue
        views = table_names(con)
        parts = [f"select '{kind}' as kind, name, run_id, dur_ns from ({sql})"
                 for kind, (view, sql) in ITEM_SOURCES.items() if view in views]
        con.execute("insert into comparison_items " + " union all ".join(parts))
        if "steps" in views:
            con.execute("insert into compared_steps select run_id from steps")
    if missing:
        raise ValueError(f"run(s) {', '.join(map(repr, missing))} not in the lake (tracelake runs lists the runs)")
    con.execute("create or replace temp view steps as select run_id from compared_steps")  # what the query counts
    return con.sql(comparison_sql(), params={"run_a": run_a, "run_b": run_b}).pl()
