"""Views over every committed table of a lake, spanning all runs, for SQL, notebooks and SQL clients."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from pipelines.lake import LAYERS, Lake
from pipelines.storage import is_local, storage_options_for
from transforms.runner import connect, read_files_sql

if TYPE_CHECKING:  # polars is imported on use: `tracelake ingest` and `import tracelake` need not pay for it
    import polars as pl

CATALOG_NAME = "catalog.duckdb"
Committed = dict[str, dict[str, list[str]]]  # layer → table → URLs of its committed files, all runs
T = TypeVar("T")


def _create_view(con: duckdb.DuckDBPyConnection, layer: str, table: str, urls: list[str], *, literal: bool) -> None:
    """A view of ``table`` over its Parquet files ``urls``, ``run_id`` first.

    ``run_id`` is a Hive partition column, so filters on it prune whole runs' files.
    """
    files = read_files_sql(con, f"{layer}_{table}", urls, literal=literal, hive=True)
    con.execute(f"create or replace view {table} as select run_id, * exclude (run_id) from ({files})").fetchall()


def read_while_rewritten(lake: Lake, read: Callable[[Committed], T]) -> T:
    """``read(committed)`` over the lake's committed files, made again while runs are rewritten under it.

    A commit deletes the files of the run's older version at once, so a reader that listed the
    manifests before it fails on a missing file (when a view binds, or mid-query). The read is then
    made again from the manifests as they are now; a failure the lake's changes do not explain is raised.
    """
    committed = _committed_files(lake)
    while True:
        try:
            return read(committed)
        except duckdb.IOException:
            latest = _committed_files(lake)
            if latest == committed:
                raise
            committed = latest


def _committed_files(lake: Lake) -> Committed:
    return {layer: lake.committed_files(layer) for layer in LAYERS}


def create_views(con: duckdb.DuckDBPyConnection, committed: Committed, *, literal: bool = False) -> None:
    """One view per table of every layer, named by the bare table name, all or none of them.

    With ``literal`` the views name their files (:func:`transforms.runner.read_files_sql`).
    """
    con.begin()
    try:
        for layer, tables in committed.items():
            for table, urls in sorted(tables.items()):
                _create_view(con, layer, table, urls, literal=literal)
    except duckdb.Error:
        con.rollback()
        raise
    con.commit()


def register_lake_views(con: duckdb.DuckDBPyConnection, lake: Lake, *, literal: bool = False) -> None:
    """Create the lake's views (:func:`create_views`) over the files its manifests commit.

    Only committed files are read, so an interrupted write is never visible.
    """
    read_while_rewritten(lake, lambda committed: create_views(con, committed, literal=literal))


def open_lake(url: str, options: dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with every lake table as a view (``kernels``, ``step_breakdown``, …).

    Example:
        >>> con = open_lake("./lake")
        >>> con.sql("select run_id, count(*) from kernels group by run_id").pl()
    """
    lake = Lake(url, options)
    con = connect(lake)
    register_lake_views(con, lake)
    return con


def open_lake_polars(url: str, options: dict[str, Any] | None = None) -> dict[str, pl.LazyFrame]:
    """Every lake table as a Polars LazyFrame over its committed files, ``run_id`` first.

    Example:
        >>> tables = open_lake_polars("./lake")
        >>> tables["kernels"].group_by("run_id").agg(pl.col("dur_ns").sum()).collect()
    """
    import polars as pl

    lake = Lake(url, options)
    scan_options = None if is_local(lake.fs) else _polars_storage_options(url, options)
    frames = {}
    for layer in LAYERS:
        for table, urls in sorted(lake.committed_files(layer).items()):
            frame = pl.scan_parquet(urls, hive_partitioning=True, hive_schema={"run_id": pl.String},
                                    missing_columns="insert",
                                    extra_columns="ignore", storage_options=scan_options)
            frames[table] = frame.select("run_id", pl.exclude("run_id"))
    return frames


def _polars_storage_options(url: str, options: dict[str, Any] | None) -> dict[str, str]:
    """fsspec options (plus the AWS environment) in the form of Polars' native object-store client."""
    merged = storage_options_for(url, options)
    endpoint = (merged.get("client_kwargs") or {}).get("endpoint_url") or merged.get("endpoint_url")
    out = {"aws_region": os.environ.get("AWS_DEFAULT_REGION", "us-east-1")}
    if endpoint:
        out |= {"aws_endpoint_url": endpoint, "aws_allow_http": str(endpoint.startswith("http://")).lower()}
    for key, name in (("key", "aws_access_key_id"), ("secret", "aws_secret_access_key"), ("token", "aws_session_token")):
        if merged.get(key):
            out[name] = str(merged[key])
    return out


def default_catalog_path(lake: Lake) -> Path | None:
    """``LAKE/catalog.duckdb`` for a local lake; None for object stores (give a local path instead)."""
    return Path(lake.root) / CATALOG_NAME if is_local(lake.fs) else None


@contextmanager
def catalog_lock(path: Path) -> Iterator[None]:
    """Hold the lock of the catalog file ``path``: one writer at a time, across threads and processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{path.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def write_catalog(lake: Lake, path: Path) -> Path:
    """Write a DuckDB database file holding one view per lake table, for the DuckDB CLI, DBeaver or notebooks.

    The views name the committed files literally (a DuckDB file cannot hold the manifests'
    logic), so the file is rewritten after every commit; it is written beside ``path`` and
    renamed over it, so readers never see a half-written catalog. Writers take turns
    (:func:`catalog_lock`) and each lists the manifests only once it is its turn, so when two runs
    commit at once the later catalog holds both. Views over ``s3://`` need DuckDB's httpfs
    extension and AWS settings in the client that opens the file.
    """
    with catalog_lock(path):
        fd, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.close(fd)
        Path(staging).unlink()  # DuckDB creates the file itself
        with duckdb.connect(staging) as con:
            register_lake_views(con, lake, literal=True)
        Path(staging).replace(path)
    return path

