"""The DuckDB catalog file, run_id partition pruning, and the Polars view of the lake."""

from __future__ import annotations

import threading

import duckdb
import polars as pl

from pipelines.ingest import ingest_run
from pipelines.lake import Lake, schema_groups
from pipelines.sources import discover_runs
from tracelake.query import run_query
from transforms.catalog import (
    CATALOG_NAME,
    catalog_lock,
    open_lake,
    open_lake_polars,
    register_lake_views,
    write_catalog,
)

COUNTS = "select run_id, count(*) from kernels group by run_id order by run_id"


def test_ingest_keeps_a_catalog_file_that_plain_duckdb_opens(example_lake):
    with duckdb.connect(str(example_lake / CATALOG_NAME), read_only=True) as con:
        views = {row[0] for row in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
        assert {"kernels", "traces", "steps", "memory_events", "runs"} <= views
        from_catalog = con.execute(COUNTS).fetchall()
        runs = con.execute("select run_id from traces order by run_id").fetchall()
    assert from_catalog == open_lake(str(example_lake)).execute(COUNTS).fetchall()
    assert [run for (run,) in runs] == ["cpu_mlp", "nccl_rank0_of_2", "rocm_mi250", "simple_add"]


def test_filter_on_run_id_reads_one_run_of_four(example_lake):
    query = "explain analyze select count(*) from kernels where run_id = 'simple_add'"
    for con in (open_lake(str(example_lake)), duckdb.connect(str(example_lake / CATALOG_NAME), read_only=True)):
        plan = con.execute(query).fetchall()[0][1]
        assert "File Filters: run_id = 'simple_add'" in plan
        assert "Scanning Files: 1/4" in plan


def test_polars_lazy_frames_match_sql(example_lake):
    tables = open_lake_polars(str(example_lake))
    assert {"kernels", "traces", "runs"} <= set(tables)
    counts = tables["kernels"].group_by("run_id").len().sort("run_id").collect()
    assert counts.rows() == open_lake(str(example_lake)).execute(COUNTS).fetchall()
    assert tables["traces"].collect_schema().names()[0] == "run_id"
    assert tables["runs"].select(pl.len()).collect().item() == 4


def test_a_catalog_write_that_waits_its_turn_includes_a_run_committed_meanwhile(shared_traces, tmp_path):
    runs = {r.run_id: r for r in discover_runs(str(shared_traces))}
    lake = Lake(str(tmp_path / "lake"))
    ingest_run(runs["simple_add"], lake)
    path = tmp_path / "lake" / CATALOG_NAME
    with catalog_lock(path):  # another run's writer is busy with the catalog
        writer = threading.Thread(target=write_catalog, args=(lake, path))
        writer.start()
        ingest_run(runs["cuda_sync"], lake)  # a second run commits while the first waits
        assert writer.is_alive(), "write_catalog did not wait for the lock"
    writer.join(timeout=60)
    with duckdb.connect(str(path), read_only=True) as con:
        catalog_runs = con.execute("select distinct run_id from traces order by run_id").fetchall()
    assert catalog_runs == [("cuda_sync",), ("simple_add",)]


def test_runs_written_with_different_schemas_read_as_one_view(tmp_path):
    """Files are grouped by the schema tag in their names; the groups, and untagged files, unite by name."""
    lake = Lake(str(tmp_path / "lake"))
    selects = {
        "a": "select 1::bigint as x, 'one' as y",
        "b": "select 2::bigint as x, 'two' as y, 2.5::double as z",  # a later tracelake added a column
        "c": "select 3::bigint as x, 'three' as y",
    }
    for run_id, select in selects.items():
        local = tmp_path / f"{run_id}.parquet"
        duckdb.sql(f"copy ({select}) to '{local}' (format parquet)")
        lake.write_run("raw", run_id, {"widgets": [("t0", local)]})
    # A file of a lake written before names carried a tag: columns in another order, another integer type.
    legacy = "raw/widgets/run_id=legacy/v20250101T000000abcdef-t0.parquet"
    (tmp_path / "lake" / legacy).parent.mkdir(parents=True)
    duckdb.sql(f"copy (select 'four' as y, 4::integer as x) to '{tmp_path / 'lake' / legacy}' (format parquet)")
    lake.commit("raw", "legacy", "v20250101T000000abcdef", {"widgets": [legacy]})

    expected = [("a", 1, "one", None), ("b", 2, "two", 2.5), ("c", 3, "three", None), ("legacy", 4, "four", None)]
    query = "select run_id, x, y, z from widgets order by run_id"
    assert open_lake(str(tmp_path / "lake")).execute(query).fetchall() == expected
    with duckdb.connect(str(write_catalog(lake, tmp_path / "catalog.duckdb")), read_only=True) as con:
        assert con.execute(query).fetchall() == expected

    groups = schema_groups(lake.committed_files("raw")["widgets"])
    runs = [sorted(url.split("run_id=")[1].split("/")[0] for url in files) for files, _ in groups]
    assert sorted(runs[:-1]) == [["a", "c"], ["b"]] and runs[-1] == ["legacy"]  # untagged files last
    assert [same for _, same in groups] == [True, True, False]


class _RewrittenAfterListing(Lake):
    """A lake where another writer rewrites run ``a`` just after this reader's first listing.

    That is the moment that failed ingest runs in CI: a run's catalog write had listed another
    run's manifest when that run's next version committed and deleted the files listed.
    """

    def __init__(self, url: str, rewrite) -> None:
        super().__init__(url)
        self._rewrite = rewrite

    def committed_files(self, layer: str, run_ids: set[str] | None = None) -> dict[str, list[str]]:
        files = super().committed_files(layer, run_ids)
        rewrite, self._rewrite = self._rewrite, None
        if rewrite:
            rewrite()
        return files


def test_views_are_made_again_when_a_run_is_rewritten_while_they_bind(tmp_path):
    url = str(tmp_path / "lake")

    def write(value: int) -> None:
        local = tmp_path / f"{value}.parquet"
        duckdb.sql(f"copy (select {value} as x) to '{local}' (format parquet)")
        Lake(url).write_run("raw", "a", {"widgets": [("t0", local)]})

    write(1)
    query = "select run_id, x from widgets"
    con = duckdb.connect()
    register_lake_views(con, _RewrittenAfterListing(url, lambda: write(2)))
    assert con.execute(query).fetchall() == [("a", 2)]

    catalog = write_catalog(_RewrittenAfterListing(url, lambda: write(3)), tmp_path / "catalog.duckdb")
    with duckdb.connect(str(catalog), read_only=True) as con:
        assert con.execute(query).fetchall() == [("a", 3)]


def test_sql_over_a_run_rewritten_meanwhile_reads_one_whole_version_each_time(tmp_path):
    """``tracelake sql`` while a writer commits run ``a`` again and again: every answer comes whole, from one version."""
    url, tables = str(tmp_path / "lake"), 20

    def write(version: int) -> None:
        files = {}
        for table in range(tables):
            local = tmp_path / f"t{table}.parquet"
            duckdb.sql(f"copy (select {version} as x from range(1000)) to '{local}' (format parquet)")
            files[f"t{table}"] = [("part", local)]
        Lake(url).write_run("raw", "a", files)

    def rewrite_until_stopped() -> None:
        version = 1
        while not stop.is_set():
            write(version)
            version += 1

    write(0)
    stop = threading.Event()
    writer = threading.Thread(target=rewrite_until_stopped)
    writer.start()
    every_table = " union all ".join(f"select x from t{table}" for table in range(tables))
    try:
        answers = [run_query(f"select count(distinct x), count(*), min(x) from ({every_table})", url)[1][0]
                   for _ in range(20)]
    finally:
        stop.set()
        writer.join()
    assert {answer[:2] for answer in answers} == {(1, tables * 1000)}
    assert len({answer[2] for answer in answers}) > 1  # versions were committed between the queries
