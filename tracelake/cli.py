"""tracelake: PyTorch profiler (Kineto) traces into a Parquet lake you query with SQL.

example:
  tracelake ingest traces/ && tracelake sql "select * from step_breakdown"

Commands in the order of a first session: ingest traces, see what landed, query it, compare runs.
Every --lake defaults to $TRACELAKE_LAKE, else ./lake."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, NoReturn

import orjson

from pipelines.settings import CATALOG, LAKE, MEMORY_LIMIT, RETENTION


def _storage_options(values: list[str]) -> dict[str, Any] | None:
    """``--storage-option key=value`` pairs (values parsed as JSON where they are, e.g. true / 3)."""
    options: dict[str, Any] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"tracelake: --storage-option expects KEY=VALUE, got {item!r}")
        try:
            options[key] = orjson.loads(value)
        except orjson.JSONDecodeError:
            options[key] = value
    return options or None


def default_lake() -> str:
    """Where every command finds the lake without ``--lake``: ``TRACELAKE_LAKE``, else ``./lake``."""
    return LAKE.value() or "lake"


def _lake_options(command: argparse.ArgumentParser, *, lake_help: str = "", optional: bool = False) -> None:
    """``--lake``, ``--catalog`` and ``--storage-option``; an ``optional`` lake is None unless named or found."""
    command.add_argument("--lake", default=None if optional else default_lake(), help=lake_help or LAKE_HELP)
    command.add_argument("--catalog", default=CATALOG.value(),
                         help="the lake's DuckLake catalog: postgresql://user@host:port/db or a file path "
                         "(default: TRACELAKE_CATALOG, else LAKE/catalog.sqlite for a local lake)")
    command.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE", help=OPTION_HELP)


def _found_lake() -> str | None:
    """The default lake where one is there to read: named by ``TRACELAKE_LAKE``, or a ``./lake`` folder."""
    return LAKE.value() or ("lake" if os.path.isdir("lake") else None)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tracelake")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _parser() -> argparse.ArgumentParser:
    """The command line; commands are listed (and added) in the order of a first session."""
    parser = argparse.ArgumentParser(prog="tracelake", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"tracelake {_version()}",
                        help="print the installed version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_demo, _add_ingest, _add_browse_commands, _add_sql, _add_compare, _add_check, _add_history,
                _add_files, _add_ui, _add_upkeep):
        add(commands)
    return parser


def _add_demo(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser("demo", help="profile small torch jobs, ingest them with sample GPU traces, report")
    demo.add_argument("--lake", default=default_lake(),
                      help="where to write the demo lake (default: $TRACELAKE_LAKE, else ./lake)")
    demo.add_argument("--traces", default="demo-traces", help="where to write the demo traces (default: ./demo-traces)")


def _add_ingest(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ingest = commands.add_parser("ingest", help="ingest every trace under SOURCE into the lake and build every table")
    ingest.add_argument("source", help="local folder or fsspec URL (s3://bucket/prefix) holding one folder per run")
    ingest.add_argument("--jobs", type=int, default=1, help="runs ingested at once, each in a worker process "
                        "(default 1); for many small traces, the number of cores")
    ingest.add_argument("--memory-limit", default=None, metavar="SIZE",
                        help="peak memory of ingesting each run, e.g. 1GB or 4GB, whatever its traces' size: the "
                        "parse, the analysis tables and the commit share it and spill to disk beyond it; a step of a "
                        "trace too large for it is an error that names the step (with --jobs, each job holds this "
                        f"much; default: {MEMORY_LIMIT.name}, else {MEMORY_LIMIT.default})")
    ingest.add_argument("--no-record", dest="record", action="store_false",
                        help="do not record the runs for the Dagster instance that tracelake ui shows")
    _lake_options(ingest)


def _add_sql(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sql = commands.add_parser("sql", help="run read-only SQL over every run of the lake")
    sql.add_argument("query", help="one SELECT (or EXPLAIN of one); every table is a view by its bare name, and "
                     "lake.<raw|marts>.<table> AT (VERSION => N) reads an older snapshot that retention keeps")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table", help=FORMAT_HELP)
    sql.add_argument("--run", help="the bare names hold only this run's rows, read from its own files "
                     "(a query about one run, as fast in a lake of 10,000 runs as of 10)")
    _lake_options(sql)


def _add_compare(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    compare = commands.add_parser("compare", help="what got slower from RUN_A to RUN_B: kernels, ops, collectives, steps")
    compare.add_argument("run_a", help="the baseline run_id")
    compare.add_argument("run_b", help="the run_id compared with it")
    compare.add_argument("--format", choices=("table", "csv", "json"), default="table", help=FORMAT_HELP)
    compare.add_argument("--kind", choices=("kernel", "collective", "op", "step", "phase"), action="append",
                         help="only these kinds of rows (repeatable; default all)")
    compare.add_argument("--limit", type=int, default=30, help="rows to print, largest slowdown first (0: all)")
    compare.add_argument("--out", help="also write the whole run_comparison table to this Parquet file")
    _lake_options(compare)


def _add_check(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = commands.add_parser("check", help="the regression gate: exit 1 when RUN regressed against its baseline "
                                "beyond the threshold and the noise")
    check.add_argument("run_id", help="the run to check")
    check.add_argument("--baseline", help="the run to compare with (default: the previous run of RUN's job)")
    check.add_argument("--max-regression", default="5%", help="how much worse a metric may get, as 5%% or 0.05 "
                       "(default 5%%); a change inside the runs' step-to-step noise never fails")
    check.add_argument("--metric", action="append", help="only this headline metric (repeatable; default all of "
                       "run_metrics: step_ns, exposed_communication_ns, step_gpu_utilization_ratio, *_kernel_ns, ...); "
                       "straggler_recurrence_ratio (asked for only) fails on a persistent straggler: a rank that is "
                       "the run's straggler and the culprit of half its steps or more")
    check.add_argument("--format", choices=("table", "json"), default="table", help="table: for people; json: "
                       "the verdict, each metric and what got slower, exact values")
    _lake_options(check)


def _add_history(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    history = commands.add_parser("history", help="the committed versions of a run the lake keeps (snapshot, when, "
                                  "source fingerprint) and how many it expired")
    history.add_argument("run_id", help="the run whose versions to list")
    history.add_argument("--format", choices=("table", "csv", "json"), default="table", help=FORMAT_HELP)
    _lake_options(history)


def _add_ui(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ui = commands.add_parser("ui", help="start the Dagster UI over the project's definitions")
    ui.add_argument("--lake", default=default_lake(), help="the lake the assets write (default: $TRACELAKE_LAKE, "
                    "else ./lake)")
    ui.add_argument("--source", default=None, help="the folder or URL the sensor watches for new runs "
                    "(default: $TRACELAKE_SOURCE, else ./demo-traces)")
    ui.add_argument("--catalog", default=None, help="the lake's DuckLake catalog, as for ingest (default: "
                    "TRACELAKE_CATALOG, else LAKE/catalog.sqlite for a local lake)")
    ui.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0 for all)")
    ui.add_argument("--port", type=int, default=3000, help="port to listen on (default 3000)")


def _add_upkeep(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    maintain = commands.add_parser("maintain", help="merge small files, expire old versions, sweep killed ingests' files")
    maintain.add_argument("--retention", default=None,
                          help="keep versions replaced less than this DuckDB interval ago readable "
                               f"(default: TRACELAKE_RETENTION, else {RETENTION.default})")
    maintain.add_argument("--leftover-age", default="1 day",
                          help="staged and orphaned files older than this are deleted (default 1 day)")
    _lake_options(maintain)

    migrate = commands.add_parser("migrate", help="convert a lake written by tracelake 0.1 (per-run manifests)")
    _lake_options(migrate)


LAKE_HELP = ("the lake: local folder or fsspec URL (s3://bucket/prefix) of a lake written by tracelake ingest "
             "(default: $TRACELAKE_LAKE, else ./lake)")
FORMAT_HELP = "table: for people (units µs/ms/s, KiB/MiB/GiB, %%); csv / json: exact values (ns, bytes)"
OPTION_HELP = ("fsspec option for s3:// and other URLs, e.g. key=..., secret=..., "
               "client_kwargs='{\"endpoint_url\": \"http://...\"}' (repeatable; default: the AWS_* variables)")


def _add_browse_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``runs`` and ``tables``: what a lake holds, and what each table and column means."""
    runs = commands.add_parser("runs", help="list the lake's runs: id, traces, ranks, device, when")
    runs.add_argument("--format", choices=("table", "csv", "json"), default="table", help=FORMAT_HELP)
    _lake_options(runs)

    tables = commands.add_parser("tables", help="list the tables and which question each answers, or one "
                                 "table's columns with their meaning and units")
    tables.add_argument("table", nargs="?", help="a table name (kernels, step_breakdown, ...); none: all tables")
    tables.add_argument("--format", choices=("table", "csv", "json"), default="table", help=FORMAT_HELP)
    _lake_options(tables, lake_help="also list the columns this lake's tables hold, where it exists "
                  "(default: $TRACELAKE_LAKE, else ./lake; without a lake, the documented columns)", optional=True)


def _add_files(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    files = commands.add_parser("files", help="the data files of the lake's current snapshot, one per line, from "
                                "its catalog: what a direct Parquet reader reads to see exactly the catalog's rows")
    files.add_argument("table", nargs="?", help="a table name (kernels, step_breakdown, ...); none: every table's")
    _lake_options(files)


def _run_browse_command(args: argparse.Namespace) -> int:
    from tracelake.browse import list_files, list_runs, show_tables

    options = _storage_options(args.storage_option)
    if args.command == "runs":
        return list_runs(args.lake, options=options, catalog=args.catalog, fmt=args.format)
    if args.command == "files":
        return list_files(args.table, args.lake, options=options, catalog=args.catalog)
    lake = args.lake or _found_lake()
    return show_tables(args.table, lake_url=lake, options=options, catalog=args.catalog, fmt=args.format)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``tracelake`` console script."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return _run(args)
    # No lake, a Dagster home that won't open, storage failures (no bucket, bad credentials, endpoint down): one line.
    except Exception as exc:
        from dagster_project.home import HomeError
        from pipelines.lake.lake import LakeError
        from pipelines.storage import describe_error, is_storage_error

        if not isinstance(exc, (LakeError, HomeError)) and not is_storage_error(exc):
            raise
        print(f"tracelake {args.command}: {describe_error(exc) if is_storage_error(exc) else exc}", file=sys.stderr)
        return 2


def entry() -> NoReturn:
    """The console script."""
    sys.exit(main())


def _run(args: argparse.Namespace) -> int:
    if args.command in ("runs", "tables", "files"):
        return _run_browse_command(args)
    if args.command == "ingest":
        from tracelake.ingest import ingest
        from transforms.composition.ingest import IngestSettings
        from transforms.composition.steps import BuildSettings

        build = BuildSettings(memory_limit=args.memory_limit) if args.memory_limit else BuildSettings()
        try:
            return ingest(args.source, args.lake, storage_options=_storage_options(args.storage_option),
                          catalog=args.catalog, jobs=args.jobs, settings=IngestSettings(build=build),
                          record=args.record)
        except FileNotFoundError as exc:  # the SOURCE itself (a trace gone mid-ingest is that run's error line)
            if exc.filename is not None or not str(exc).startswith("source "):
                raise
            print(f"tracelake ingest: {exc}: give a folder or URL holding trace files (*.json, *.json.gz)",
                  file=sys.stderr)
            return 2
    if args.command == "sql":
        from tracelake.output import write_result
        from tracelake.query import run_sql
        from tracelake.result_units import unit_columns

        try:
            columns, rows = run_sql(args.query, args.lake, options=_storage_options(args.storage_option),
                                    catalog=args.catalog, run=args.run)
        except (ValueError, RuntimeError, TimeoutError, LookupError) as exc:
            print(f"tracelake sql: {exc}", file=sys.stderr)
            return 2
        except Exception as exc:  # DuckDB's own errors: show them as one line, not a traceback
            if type(exc).__module__.startswith(("duckdb", "_duckdb")):
                print(f"tracelake sql: {exc}", file=sys.stderr)
                return 2
            raise
        units = unit_columns(args.query, columns) if args.format == "table" else None
        write_result(columns, rows, args.format, units=units)
        return 0
    if args.command == "compare":
        from tracelake.compare import run_compare

        return run_compare(args.run_a, args.run_b, args.lake, options=_storage_options(args.storage_option),
                           catalog=args.catalog, kinds=args.kind, limit=args.limit, fmt=args.format, out=args.out)
    if args.command == "check":
        from tracelake.check import parse_threshold, run_check

        try:
            threshold = parse_threshold(args.max_regression)
        except ValueError as exc:
            print(f"tracelake check: {exc}", file=sys.stderr)
            return 2
        return run_check(args.run_id, args.lake, baseline=args.baseline, max_regression=threshold,
                         metrics=args.metric, options=_storage_options(args.storage_option), catalog=args.catalog,
                         fmt=args.format)
    if args.command in ("history", "maintain", "migrate"):
        from tracelake import housekeeping

        command = {"history": housekeeping.history, "maintain": housekeeping.maintain,
                   "migrate": housekeeping.migrate}[args.command]
        return command(args, _storage_options(args.storage_option))
    if args.command == "demo":
        from tracelake.demo import run_demo

        return run_demo(lake_url=args.lake, traces_dir=args.traces)
    from tracelake.ui import run_ui

    return run_ui(lake_url=args.lake, source_url=args.source, host=args.host, port=args.port, catalog=args.catalog)


if __name__ == "__main__":
    entry()
