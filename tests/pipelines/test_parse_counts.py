"""Every shared trace parses, and each raw table holds exactly the events an independent count expects."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import duckdb
import fsspec
import pytest

from pipelines.identity import TraceFile
from pipelines.parse import ParseSettings, parse_trace
from pipelines.tables import EVENT_TABLES
from tests.conftest import SHARED_TRACES

TRACES = sorted(SHARED_TRACES.rglob("*.json.gz")) if SHARED_TRACES.is_dir() else []
NOT_KINETO = "not_kineto_execution_trace.json.gz"


def expected_table(event: dict) -> str:
    """Where an event belongs, written from CONTRACT.md and ANCHORS.md §1.2 independently of schema.ROUTE."""
    ph, cat = event.get("ph"), (event.get("cat") or "")
    if ph == "X":
        by_cat = {
            "kernel": "kernels", "mtia_ccp_events": "kernels", "gpu_memcpy": "gpu_memcpy", "memcpy": "gpu_memcpy",
            "gpu_memset": "gpu_memset", "memset": "gpu_memset", "cuda_sync": "gpu_syncs", "runtime": "runtime_calls",
            "cpu_op": "cpu_ops", "operator": "cpu_ops", "user_annotation": "annotations",
            "gpu_user_annotation": "annotations", "python_function": "python_functions", "python": "python_functions",
            "trace": "profiler_spans", "cuda_profiler_range": "profiler_spans",
        }
        if cat.endswith(("_runtime", "_driver")):
            return "runtime_calls"
        return by_cat.get(cat.lower(), "other_events")
    if ph in ("i", "I"):
        return "memory_events" if event.get("name") == "[memory]" else "markers"
    return {"s": "flows", "t": "flows", "f": "flows", "M": "track_names", "C": "counters"}.get(ph, "other_events")


def load(path: Path) -> dict:
    with gzip.open(path) as f:
        return json.load(f, parse_float=Decimal)


@pytest.mark.parametrize("path", TRACES, ids=[p.name for p in TRACES])
def test_row_counts_match_an_independent_count(path: Path, tmp_path: Path) -> None:
    trace = TraceFile(url=str(path), run_id="r", trace_id="t", size_bytes=path.stat().st_size)
    parsed = parse_trace(fsspec.filesystem("file"), str(path), trace, workdir=tmp_path, settings=ParseSettings())
    document = load(path)
    if path.name == NOT_KINETO:
        assert parsed.event_count == 0
        assert [i.code for i in parsed.issues] == ["not_a_kineto_trace"]
        return
    events = document["traceEvents"]
    expected = Counter(expected_table(e) for e in events)
    con = duckdb.connect()
    counts = {  # counters has a row per value of an event
        table: con.execute(f"select count({'distinct event_idx' if table == 'counters' else '*'}) from read_parquet($p)",
                           {"p": str(parsed.table_files[table])}).fetchone()[0]
        for table in EVENT_TABLES
    }
    assert counts == {table: expected.get(table, 0) for table in EVENT_TABLES}
    assert parsed.event_count == len(events)
    host_step_cats = {"user_annotation", "cpu_op", "operator"}  # not gpu_user_annotation copies on the device
    steps = sum(
        1 for e in events
        if e.get("ph") == "X" and e.get("cat", "").lower() in host_step_cats
        and str(e.get("name", "")).startswith("ProfilerStep#")
    )
    assert con.execute("select count(*) from read_parquet($p)", {"p": str(parsed.table_files["steps"])}).fetchone()[0] == steps
    assert [i for i in parsed.issues if i.severity == "error"] == []


@pytest.mark.parametrize(
    "name", ["nccl_rank0_of_2/rank-0.json.gz", "tb_plugin_resnet50/worker0.1623143089861.pt.trace.json.gz"]
)
def test_timestamps_are_exact_nanoseconds(name: str, tmp_path: Path, shared_traces: Path) -> None:
    """ts_ns = baseTimeNanoseconds + ts × 1000 exactly, computed here with decimals (ANCHORS.md §11)."""
    path = shared_traces / name
    trace = TraceFile(url=str(path), run_id="r", trace_id="t", size_bytes=0)
    parsed = parse_trace(fsspec.filesystem("file"), str(path), trace, workdir=tmp_path, settings=ParseSettings())
    document = load(path)
    base = document.get("baseTimeNanoseconds", 0)

    def ns(value: Decimal | int) -> int:
        return int((Decimal(value) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))

    kernels = [e for e in document["traceEvents"] if e.get("ph") == "X" and e.get("cat", "").lower() == "kernel"]
    expected = [(base + ns(e["ts"]), ns(e["dur"])) for e in kernels]
    got = duckdb.connect().execute(
        "select ts_ns, dur_ns from read_parquet($p) order by event_idx", {"p": str(parsed.table_files["kernels"])}
    ).fetchall()
    assert got == expected
    assert parsed.base_time_ns == (base or None)


def test_kernel_args_become_typed_columns(tmp_path: Path, shared_traces: Path) -> None:
    path = shared_traces / "nccl_rank0_of_2/rank-0.json.gz"
    trace = TraceFile(url=str(path), run_id="r", trace_id="t", size_bytes=0)
    parsed = parse_trace(fsspec.filesystem("file"), str(path), trace, workdir=tmp_path, settings=ParseSettings())
    kernels = [e for e in load(path)["traceEvents"] if e.get("cat") == "kernel"]
    nccl = next(e for e in kernels if "Collective name" in e["args"])
    plain = next(e for e in kernels if "grid" in e["args"])
    con = duckdb.connect()
    row = con.execute(
        """select collective_name, in_msg_nelems, out_msg_nelems, group_size, dtype, process_group_name,
                  process_group_ranks, stream, device, correlation, external_id
           from read_parquet($p) where correlation = $c""",
        {"p": str(parsed.table_files["kernels"]), "c": nccl["args"]["correlation"]},
    ).fetchone()
    a = nccl["args"]
    assert row == (
        a["Collective name"], a["In msg nelems"], a["Out msg nelems"], a["Group size"], a["dtype"],
        a["Process Group Name"], a["Process Group Ranks"], a["stream"], a["device"], a["correlation"], a["External id"],
    )
    row = con.execute(
        """select grid_x, grid_y, grid_z, block_x, block_y, block_z, registers_per_thread, shared_memory_bytes,
                  blocks_per_sm, warps_per_sm, est_achieved_occupancy_pct
           from read_parquet($p) where correlation = $c""",
        {"p": str(parsed.table_files["kernels"]), "c": plain["args"]["correlation"]},
    ).fetchone()
    a = plain["args"]
    assert row == (
        *a["grid"], *a["block"], a["registers per thread"], a["shared memory"],
        float(a["blocks per SM"]), float(a["warps per SM"]), float(a["est. achieved occupancy %"]),
    )
