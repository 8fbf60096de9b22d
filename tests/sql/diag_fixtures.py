"""Hand-built Kineto traces for the diagnosis marts (stragglers, step_health, ...): minimal but valid JSON that
both our ingest and HTA 0.5.0 read. Times are given in µs relative to the trace base, as Kineto writes them."""

from __future__ import annotations

import json
from pathlib import Path

BASE_NS = 1_700_000_000_000_000_000
CPU_PID, CPU_TID, GPU_STREAM = 100, 100, 7


def step(n: int, ts_us: float, dur_us: float) -> dict:
    """A ProfilerStep#n annotation on the main thread."""
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": CPU_PID, "tid": CPU_TID,
            "ts": ts_us, "dur": dur_us, "args": {"External id": 10_000 + n}}


def cpu_op(name: str, ts_us: float, dur_us: float, external_id: int, tid: int = CPU_TID) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": CPU_PID, "tid": tid, "ts": ts_us, "dur": dur_us,
            "args": {"External id": external_id}}


def launch(ts_us: float, dur_us: float, correlation: int, name: str = "cudaLaunchKernel") -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": CPU_PID, "tid": CPU_TID, "ts": ts_us,
            "dur": dur_us, "args": {"correlation": correlation, "External id": correlation}}


def kernel(name: str, ts_us: float, dur_us: float, correlation: int, stream: int = GPU_STREAM, **args) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts_us, "dur": dur_us,
            "args": {"device": 0, "stream": stream, "correlation": correlation, "External id": correlation, **args}}


def memory_op(name: str, ts_us: float, dur_us: float, correlation: int, stream: int, gbps: float) -> dict:
    """A GPU memcpy or memset (by ``name``: "Memcpy HtoD (...)", "Memset (Device)") moving data at ``gbps``."""
    cat = "gpu_memset" if name.startswith("Memset") else "gpu_memcpy"
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts_us, "dur": dur_us,
            "args": {"device": 0, "stream": stream, "correlation": correlation,
                     "bytes": round(gbps * dur_us * 1000), "memory bandwidth (GB/s)": gbps}}


def allreduce_args(seq: int, ranks: list[int]) -> dict:
    """NCCL collective args of a 1 MiB float all-reduce over ``ranks`` (process group "0")."""
    return {"Collective name": "allreduce", "In msg nelems": 262144, "Out msg nelems": 262144,
            "Group size": len(ranks), "dtype": "Float", "Process Group Name": "0",
            "Process Group Ranks": str(ranks), "Seq": seq}


def write_trace(folder: Path, rank: int, world_size: int, events: list[dict], backend: str = "nccl") -> Path:
    """``folder/rank-<rank>.json``, pretty-printed so that HTA's rank regex (``"rank": N``) finds the rank."""
    trace = {
        "schemaVersion": 1,
        "distributedInfo": {"backend": backend, "rank": rank, "world_size": world_size},
        "deviceProperties": [{"id": 0, "name": "fixture GPU", "totalGlobalMem": 16 * 1024**3, "computeMajor": 8,
                              "computeMinor": 0, "numSms": 108}],
        "traceEvents": events,
        "baseTimeNanoseconds": BASE_NS,
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rank-{rank}.json"
    path.write_text(json.dumps(trace, indent=1))
    return path
