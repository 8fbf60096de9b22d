"""Ids kineto writes as uint64 (``correlation``, ``graph id``, ``graph node id``, ``Comms Id``: libkineto's
include/MetadataFieldCatalog.h types them ``MetadataField<uint64_t>``) are kept exactly above int64, and the joins on
them still link a launch to its kernel.

The trace is hand-written in the current kineto layout: an aten op, its cudaLaunchKernel and the kernel, correlated
by ids of 2^63 and 2^64 - 59 (a value that read as BIGINT became null, so the kernel lost its launch), the kernel a
CUDA graph node, and an NCCL kernel with its collective's ``Comms Id``.
"""

from __future__ import annotations

import json

import pytest

from pipelines.lake.lake import Lake
from pipelines.lake.read import open_lake
from pipelines.sources import discover_runs
from transforms.composition.ingest import ingest_run

BASE_NS = 1_767_189_312_000_000_000
HIGH = 2**64 - 59  # the largest prime below 2^64
HALF = 2**63
GRAPH_ID, GRAPH_NODE_ID, COMMS_ID = 2**64 - 2, 2**63 + 12345, 2**64 - 1


def launched(op: str, ts: int, external_id: int, correlation: int, kernel_args: dict) -> list[dict]:
    """An aten op [ts, ts+20) µs, its launch at ts+5, and its kernel at ts+30 for 10 µs."""
    return [
        {"ph": "X", "cat": "cpu_op", "name": op, "pid": 9, "tid": 9, "ts": ts, "dur": 20,
         "args": {"External id": external_id}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": ts + 5, "dur": 4,
         "args": {"External id": external_id, "cbid": 211, "correlation": correlation}},
        {"ph": "X", "cat": "kernel", "name": f"{op}_kernel", "pid": 0, "tid": 7, "ts": ts + 30, "dur": 10,
         "args": {"External id": external_id, "device": 0, "stream": 7, "correlation": correlation, **kernel_args}},
    ]


EVENTS = [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 9, "tid": 9, "ts": 0, "dur": 1000},
    *launched("aten::mm", 100, 1, HIGH, {"graph id": GRAPH_ID, "graph node id": GRAPH_NODE_ID}),
    *launched("c10d::allreduce_", 300, 2, HALF, {
        "Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024, "Group size": 1,
        "dtype": "Float", "Process Group Name": "0", "Comms Id": COMMS_ID, "Seq": 0}),
]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory):
    source = tmp_path_factory.mktemp("uint64_ids") / "graphs"
    source.mkdir()
    trace = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
             "traceEvents": EVENTS, "baseTimeNanoseconds": BASE_NS}
    (source / "rank-0.json").write_text(json.dumps(trace, indent=1))
    lake_dir = tmp_path_factory.mktemp("uint64_ids_lake")
    for run in discover_runs(str(source.parent)):
        ingest_run(run, Lake(str(lake_dir)), select={"kernel_launches", "op_stats"})
    return open_lake(str(lake_dir))


def test_ids_above_int64_are_kept_exactly(lake) -> None:
    kernels = lake.sql("select name, correlation, graph_id, graph_node_id, comms_id from kernels order by ts_ns")
    assert kernels.fetchall() == [
        ("aten::mm_kernel", HIGH, GRAPH_ID, GRAPH_NODE_ID, None),
        ("c10d::allreduce__kernel", HALF, None, None, COMMS_ID),
    ]
    assert lake.sql("select correlation from runtime_calls order by ts_ns").fetchall() == [(HIGH,), (HALF,)]


def test_launches_still_find_their_kernels(lake) -> None:
    launches = lake.sql("""
        select correlation, kernel_name, cpu_ts_ns, gpu_ts_ns, launch_delay_ns
        from kernel_launches order by correlation
    """).fetchall()
    # the launch [op + 5, op + 9) µs, its kernel from op + 30 µs: 21 µs of launch delay (HTA: kernel start - launch end)
    assert launches == [
        (HALF, "c10d::allreduce__kernel", BASE_NS + 305_000, BASE_NS + 330_000, 21_000),
        (HIGH, "aten::mm_kernel", BASE_NS + 105_000, BASE_NS + 130_000, 21_000),
    ]


def test_ops_are_credited_with_their_kernels(lake) -> None:
    device = dict(lake.sql("select op_name, total_device_ns from op_stats where op_name like '%::%'").fetchall())
    assert device == {"aten::mm": 10_000, "c10d::allreduce_": 10_000}
