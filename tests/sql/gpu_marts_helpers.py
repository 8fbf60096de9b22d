"""Helpers for the kernel/op/memory mart tests: build a lake from trace files and read marts back."""

from __future__ import annotations

from pathlib import Path

import duckdb

from pipelines.lake.lake import Lake
from pipelines.sources import discover_runs
from transforms.composition.ingest import ingest_run
from transforms.models import discover_models
from transforms.runner import MartResult, register_functions, register_run_tables


def build_lake(source: Path, lake_dir: Path, marts: set[str]) -> tuple[Lake, dict[str, list[MartResult]]]:
    """Ingest every run under ``source`` and build ``marts`` for each; returns the lake and results by run_id."""
    lake = Lake(str(lake_dir))
    results: dict[str, list[MartResult]] = {}
    for run in discover_runs(str(source)):
        results[run.run_id] = ingest_run(run, lake, select=marts).marts
    return lake, results


def read_mart(lake_dir: Path, mart: str) -> list[dict]:
    """Every row of a mart (all runs) as dicts."""
    con = duckdb.connect()
    files = sorted(str(p) for p in (lake_dir / "marts" / mart).rglob("*.parquet"))
    if not files:
        return []
    cur = con.execute(f"select * from read_parquet({files!r}, hive_partitioning = true)")
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=False)) for row in cur.fetchall()]


def query_model(lake: Lake, run_id: str, model: str, sql: str) -> list[tuple]:
    """Create the staging/intermediate models over the run's raw tables and run ``sql`` (it may read ``model``)."""
    con = lake.connect(read_only=True)
    try:
        register_run_tables(con, run_id)
        register_functions(con)
        models = discover_models()
        from pipelines.tables import RAW_TABLES
        from transforms.graph import run_order

        for name in run_order(models, set(RAW_TABLES), {model}):
            kind = "table" if models[name].layer == "marts" else "view"
            con.execute(f"create or replace temp {kind} {name} as {models[name].sql}").fetchall()
        return con.execute(sql).fetchall()
    finally:
        con.close()


def close(ours: float, ref: float, abs_tol: float = 1.0, rel_tol: float = 0.005) -> bool:
    """Agreement rule of the project: within 1 µs (abs_tol, in the caller's unit) or 0.5 %, whichever is larger."""
    return abs(ours - ref) <= max(abs_tol, rel_tol * abs(ref))


def load_trace_json(path: Path) -> dict:
    """The trace JSON as the plugin reads it."""
    import gzip
    import json

    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    return json.loads(data)


def tb_kernel_stat(path: Path):
    """torch-tb-profiler's kernel_parser result (pandas DataFrame by kernel name) for one trace file."""
    from torch_tb_profiler.profiler import trace
    from torch_tb_profiler.profiler.kernel_parser import KernelParser

    events = [e for e in (trace.create_event(d, False) for d in load_trace_json(path)["traceEvents"]) if e]
    parser = KernelParser()
    parser.parse_events(events)
    return parser.kernel_stat


def tb_memory(path: Path):
    """torch-tb-profiler's memory snapshot, op tree and profiler start for one trace file."""
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.event_parser import EventParser
    from torch_tb_profiler.profiler.memory_parser import MemoryParser

    profile = RunProfileData("worker", "span", load_trace_json(path))
    tid2tree, _ = EventParser().parse(profile.events, profile.forward_backward_events)
    snapshot = MemoryParser(profile._memory_events()).find_memory_nodes(tid2tree)
    return snapshot, tid2tree
