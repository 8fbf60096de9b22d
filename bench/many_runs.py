"""Benchmark: a lake of N runs. Does opening it, committing one more run and a query pruned to one run stay flat?

Ingests the shipped example traces into a template lake, then fills a fresh lake with N synthetic runs, each a copy
of one template run (every raw table and mart) with kernel durations scaled by a per-run factor in [0.8, 1.2]. Runs
come in jobs of ten (``job00042.run07``: job ``job00042``, as a job's runs sit in one folder), a minute apart, each
job's runs copies of one template run; ``run_metrics`` says so (its ``job`` and ``started_ns``). The
runs are written by DuckLake itself, as ingests write them (one Parquet file per run and table under ``run_id=…``,
catalog rows and statistics made by the extension), ``--batch`` runs per transaction: the lake is the one per-run
commits leave, but with a snapshot per batch instead of per run. The fill is tuned, not the lake: a DuckLake
commit's cost grows faster than its file count (a commit of 100 runs' 2,800 files took 13 to 24 s here, of 20 runs'
560 files 1 s), so batches are small; the template is copied into memory once, not read through its catalog by
every batch; and the fill's connection has one thread (DuckDB's threads contend on a small machine: 46 s for 200
runs with one, 70 s with two). A PostgreSQL fill takes ~10 to 20 s per 100 runs on the loaded 2-core machine (a
minute per 100 runs before: 100 runs per transaction, the template read through its catalog, DuckDB's default
threads). Then it times, in the N-run lake, what users do: open the lake, commit one more run through the real
per-run commit (:func:`pipelines.lake.commit.replace_run`, every table in one transaction, then expiring the old
version) of a new run and of a run already there, a query about one run (``pruned_query_s``: the run's own files,
found in the catalog by one indexed query, as ``tracelake sql --run`` reads them; ``pruned_scan_s``: a DuckLake scan
filtered to the run, which lists every run's file), a query over all runs, and ``tracelake check`` of a new run of a
job in the middle of the lake (``check_new_run_s``: opening the lake, the run's verdict against its job's previous run
from ``run_regressions`` over the job's rows alone, and what got slower behind it, as the command computes them;
``check_rows_read``: the ``run_metrics`` rows the verdict read). Medians of 3 for each timed step.
``--catalog`` puts the catalog in PostgreSQL (an empty database) instead of the default SQLite file; ``--lake``
keeps the filled lake there, and a later call with the same ``--lake`` (and ``--catalog``) and as many runs times
it again without filling it.

    python bench/many_runs.py --runs 1000 --out bench/out/many_runs_1000.json
    python bench/many_runs.py --runs 10000 --catalog postgresql://user@host/db --lake /data/bench-10000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipelines.lake.commit import expire_old_versions, lake_tables, replace_run  # noqa: E402
from pipelines.lake.lake import Lake  # noqa: E402
from pipelines.lake.read import open_lake  # noqa: E402
from pipelines.lake.run_scope import scope_to_run  # noqa: E402
from pipelines.rows import sql_path  # noqa: E402
from pipelines.sources import discover_runs  # noqa: E402
from transforms.composition.ingest import ingest_run  # noqa: E402
from transforms.regressions import check_run  # noqa: E402

CROSS_RUN = """
    select name, count(*) as calls, sum(dur_ns) as total_ns, count(distinct run_id) as runs
    from kernels group by name order by total_ns desc limit 10"""
PROGRESS = 500  # runs between progress lines of a fill
PRUNED = "select count(*), sum(dur_ns) from kernels where run_id = $run"  # one run's kernels
BATCH = 20  # runs per fill transaction (--batch): a DuckLake commit's cost grows faster than its file count


def _median_of_3(step) -> float:
    times = []
    for round_no in range(3):
        start = time.perf_counter()
        step(round_no)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


RUNS_PER_JOB = 10


def run_name(i: int) -> str:
    """The i-th synthetic run's id: ten runs per job (as :data:`RUN_SQL` names them)."""
    return f"job{i // RUNS_PER_JOB:05d}.run{i % RUNS_PER_JOB:02d}"


RUN_SQL = f"printf('job%05d.run%02d', i // {RUNS_PER_JOB}, i % {RUNS_PER_JOB})"
JOB_SQL = f"printf('job%05d', i // {RUNS_PER_JOB})"
MINUTE_NS = 60 * 10**9


def _copy_select(
    table: str, template_run: str, factor: str = "1.0", new_run: str | None = None, rows: str = "",
    source: str = "template", job: str | None = None, order: str = "0",
) -> str:
    """One template run's rows of ``table`` (in the database ``source``) as another run's (``run_id`` =
    ``new_run``, or left out), kernel durations scaled by ``factor``; ``rows`` joins more rows onto each (the
    batch of run numbers). In ``run_metrics`` the run belongs to ``job`` (SQL; default the template's) and starts
    ``order`` (SQL) minutes after the template."""
    scaled = ""
    if table == "raw.kernels":
        scaled = f" replace (cast(dur_ns * {factor} as bigint) as dur_ns)"
    elif table == "marts.run_metrics" and job:
        scaled = f" replace ({job} as job, started_ns + ({order}) * {MINUTE_NS} as started_ns)"
    run = f"{new_run} as run_id, " if new_run else ""
    return (f"select {run}t.* exclude (run_id){scaled} from {source}.{table} as t{rows} "
            f"where run_id = {sql_path(template_run)}")


def _attach_template(con: duckdb.DuckDBPyConnection, template: Lake) -> list[str]:
    """Attach the template lake as ``template``; returns its tables' ``layer.table`` names (not the views over every
    run, which the lake keeps beside them)."""
    # Its own folder: a catalog inside its lake records the data path relative to itself.
    con.execute(f"attach {sql_path('ducklake:' + template.catalog.target)} as template "
                f"(read_only, data_path {sql_path(template.data_path)}, override_data_path true)")
    views = {f"{schema}.{name}" for schema, name in con.execute(
        "select schema_name, view_name from duckdb_views() where database_name = 'template'").fetchall()}
    return sorted(set(lake_tables(con, "template")) - views)


def _template_runs(lake: Lake, template: Lake) -> list[str]:
    with lake.connect(read_only=True) as con:
        _attach_template(con, template)
        return [row[0] for row in con.execute("select run_id from template.marts.runs order by run_id").fetchall()]


def fill(lake: Lake, template: Lake, runs: int, batch_runs: int = BATCH) -> list[str]:
    """Load ``runs`` synthetic runs in batches of ``batch_runs``; returns the template runs' ids."""
    started = time.perf_counter()
    with lake.connect(threads=1) as con:
        tables = _attach_template(con, template)
        names = [row[0] for row in con.execute("select run_id from template.marts.runs order by run_id").fetchall()]
        # Every batch reads every template table: from memory, not through the template's catalog each time.
        con.execute("attach ':memory:' as copied")
        for table in tables:
            con.execute(f"create schema if not exists copied.{table.split('.')[0]}")
            con.execute(f"create table copied.{table} as from template.{table}")
            con.execute(f"create table if not exists lake.{table} as select * from template.{table} limit 0")
            con.execute(f"alter table lake.{table} set partitioned by (run_id)")
        for start in range(0, runs, batch_runs):
            batch = f", (select unnest(range({start}, {min(start + batch_runs, runs)})) as i) as batch"
            con.execute("begin")
            for table in tables:
                copies = [
                    _copy_select(table, name, "(0.8 + 0.4 * (hash(i) % 1000) / 1000.0)", RUN_SQL, batch,
                                 source="copied", job=JOB_SQL, order="i")
                    + f" and (i // {RUNS_PER_JOB}) % {len(names)} = {n}"
                    for n, name in enumerate(names)
                ]
                con.execute(f"insert into lake.{table} " + " union all ".join(copies))
            con.execute("commit")
            done = min(start + batch_runs, runs)
            if done % PROGRESS == 0 or done == runs:
                print(f"  loaded {done:,} runs ({time.perf_counter() - started:.0f} s, "
                      f"load average {os.getloadavg()[0]:.1f})", flush=True)
    return names


def _lake_runs(lake: Lake) -> int:
    """How many runs a kept lake holds (0 when there is none)."""
    if not lake.exists():
        return 0
    with lake.connect(read_only=True) as con:
        return con.execute("select count(*) from lake.marts.runs where run_id similar to 'job[0-9]+\\.run[0-9]+'"
                           ).fetchone()[0]


def _catalog_bytes(lake: Lake) -> int:
    """The catalog's size: its file, or its PostgreSQL database."""
    if lake.catalog.path is not None:
        return lake.catalog.path.stat().st_size
    with lake.connect(read_only=True) as con:
        return con.execute(
            "from postgres_query('__ducklake_metadata_lake', 'select pg_database_size(current_database())')"
        ).fetchone()[0]


def time_check(
    lake: Lake, template: Lake, names: list[str], runs: int, suffix: str, catalog: str | None
) -> dict[str, object]:
    """``tracelake check`` of a new run of the job in the middle of the lake (committed as the job's latest run):
    the verdict and what got slower behind it, as the command computes them after opening the lake."""
    middle = runs // 2 // RUNS_PER_JOB
    job, template_run = f"job{middle:05d}", names[middle % len(names)]
    checked = f"{job}.{suffix}"
    with lake.connect() as con:
        tables = _attach_template(con, template)
        replace_run(con, checked, {t: _copy_select(t, template_run, job=sql_path(job), order=str(runs))
                                   for t in tables})
        expire_old_versions(con)

    def check(_: int) -> None:
        with open_lake(lake.url, catalog=catalog) as con:
            check_run(con, checked)

    seconds = _median_of_3(check)
    with open_lake(lake.url, catalog=catalog) as con:
        verdict = check_run(con, checked)
        (rows,) = con.execute("select count(*) from run_metrics").fetchone()  # the job-scoped view the verdict read
    return {"check_new_run_s": seconds, "check_rows_read": rows, "check_baseline": verdict.baseline_run_id}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--catalog", help="the lake's catalog (default: a SQLite file in the lake)")
    parser.add_argument("--lake", help="keep the filled lake in this folder (default: a temporary one)")
    parser.add_argument("--batch", type=int, default=BATCH, help="runs per fill transaction")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "many_runs.json"))
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tracelake-bench-") as tmp:
        template = Lake(os.path.join(tmp, "template"))
        for run in discover_runs(str(ROOT / "examples" / "traces")):
            ingest_run(run, template)
        lake = Lake(args.lake or os.path.join(tmp, "lake"), catalog=args.catalog)
        start = time.perf_counter()
        held = _lake_runs(lake)
        if held not in (0, args.runs):
            sys.exit(f"{lake} holds {held:,} runs, not {args.runs:,}")
        names = fill(lake, template, args.runs, args.batch) if held == 0 else _template_runs(lake, template)
        build_s = time.perf_counter() - start
        files = sum(1 for _ in Path(lake.url).rglob("*.parquet"))
        print(f"{'wrote' if held == 0 else 'kept'} {args.runs:,} runs ({files:,} Parquet files) in {build_s:.1f} s",
              flush=True)

        results: dict[str, object] = {"runs": args.runs, "catalog": lake.catalog.kind, "parquet_files": files,
                                      "build_s": round(build_s, 1)}
        results["open_lake_s"] = _median_of_3(lambda _: open_lake(lake.url, catalog=args.catalog).close())
        batch = uuid.uuid4().hex[:8]  # new run ids on every call, for a kept lake

        def commit(run_id: str) -> None:
            with lake.connect() as con:
                tables = _attach_template(con, template)
                replace_run(con, run_id, {t: _copy_select(t, names[0]) for t in tables})
                expire_old_versions(con)

        results["commit_one_run_s"] = _median_of_3(lambda round_no: commit(f"new-{batch}-{round_no}"))
        results["commit_existing_run_s"] = _median_of_3(lambda round_no: commit(run_name(round_no + 1)))
        results |= time_check(lake, template, names, args.runs, f"new-{batch}", args.catalog)
        con = open_lake(lake.url, catalog=args.catalog)
        pruned = run_name(args.runs // 2)

        def scoped_query(_: int) -> None:  # `tracelake sql --run`, `open_lake(run=…)`: the run's own files
            scope_to_run(con, pruned, ["kernels"])
            con.execute(PRUNED, {"run": pruned}).fetchall()
            con.execute("drop view temp.main.kernels")

        results["pruned_query_s"] = _median_of_3(scoped_query)
        results["pruned_scan_s"] = _median_of_3(lambda _: con.execute(PRUNED, {"run": pruned}).fetchall())
        results["cross_run_query_s"] = _median_of_3(lambda _: con.execute(CROSS_RUN).fetchall())
        con.close()
        results["catalog_bytes"] = _catalog_bytes(lake)
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    results = {k: round(v, 4) if isinstance(v, float) else v for k, v in results.items()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
