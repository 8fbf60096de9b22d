"""The CPU workloads write real, well-formed Kineto traces that the parser reads; gloo ranks really wait."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from torch.profiler._trace_validator import validate_trace

from pipelines.identity import TraceFile, trace_id_for
from pipelines.parse import ParseSettings, parse_trace
from pipelines.storage import filesystem
from tracelake.workloads import CPU_RUN_ID, GLOO_RUN_ID

ACTIVE_STEPS = [2, 3, 4]  # schedule(wait=1, warmup=1, active=3) over 6 steps


def _load(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def _spans(trace: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("name") == name]


def _gloo_traces(root: Path) -> list[dict[str, Any]]:
    return [_load(root / GLOO_RUN_ID / f"rank-{rank}.step5.pt.trace.json.gz") for rank in (0, 1)]


def test_cpu_run_writes_one_gzipped_trace_with_steps_memory_and_annotations(cpu_traces_dir: Path) -> None:
    files = sorted(p.name for p in (cpu_traces_dir / CPU_RUN_ID).iterdir())
    assert files == ["rank-0.step5.pt.trace.json.gz"]
    trace = _load(cpu_traces_dir / CPU_RUN_ID / files[0])
    assert isinstance(trace.get("baseTimeNanoseconds"), int) and "distributedInfo" not in trace
    annotations = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"}
    assert {f"ProfilerStep#{n}" for n in ACTIVE_STEPS} <= annotations
    assert {"forward", "backward", "optimizer_step"} <= annotations
    assert any(n.startswith("enumerate(DataLoader)#") and n.endswith("__next__") for n in annotations)
    memory = [e for e in trace["traceEvents"] if e.get("name") == "[memory]"]
    assert memory and all(e["ph"] == "i" and "Total Allocated" in e["args"] for e in memory)


def test_gloo_run_writes_one_trace_per_rank_with_distributed_info(gloo_traces_dir: Path) -> None:
    files = sorted(p.name for p in (gloo_traces_dir / GLOO_RUN_ID).iterdir())
    assert files == ["rank-0.step5.pt.trace.json.gz", "rank-1.step5.pt.trace.json.gz"]
    for rank, trace in enumerate(_gloo_traces(gloo_traces_dir)):
        info = trace["distributedInfo"]
        assert (info["rank"], info["world_size"], info["backend"]) == (rank, 2, "gloo")


def test_gloo_traces_hold_communication_of_several_kinds(gloo_traces_dir: Path) -> None:
    for trace in _gloo_traces(gloo_traces_dir):
        names = {e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"}
        assert {"gloo:all_reduce", "gloo:broadcast", "gloo:all_gather"} <= names
        assert {"c10d::allreduce_", "c10d::broadcast_", "c10d::allgather_"} <= names
        # DDP's gradient bucket is all-reduced once per step, besides the explicit metric all-reduce.
        assert len(_spans(trace, "c10d::allreduce_")) == 2 * len(ACTIVE_STEPS)


def test_uneven_gloo_ranks_really_wait_for_the_slow_one(gloo_traces_dir: Path) -> None:
    fast, slow = _gloo_traces(gloo_traces_dir)
    extra = [e["dur"] for e in _spans(slow, "straggler_compute")]
    idle = [e["dur"] for e in _spans(fast, "straggler_compute")]
    assert len(extra) == len(idle) == len(ACTIVE_STEPS)
    assert all(s > f + 1000 for s, f in zip(extra, idle)), (extra, idle)  # µs: rank 1 does more every step

    def comm_us(trace: dict[str, Any]) -> float:
        spans = (e for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("gloo:"))
        return sum(e["dur"] for e in spans)

    # The fast rank spends about the slow rank's extra compute waiting inside its collectives.
    waited = comm_us(fast) - comm_us(slow)
    assert waited > 0.5 * (sum(extra) - sum(idle)), (waited, extra)


def test_traces_pass_torch_trace_validator(cpu_traces_dir: Path, gloo_traces_dir: Path) -> None:
    for path in [*cpu_traces_dir.glob("*/*.json.gz"), *gloo_traces_dir.glob("*/*.json.gz")]:
        passed, violations = validate_trace(str(path))
        assert passed, (path, [str(v) for v in violations])


def test_parse_trace_reads_every_generated_trace(
    cpu_traces_dir: Path, gloo_traces_dir: Path, tmp_path: Path
) -> None:
    paths = sorted([*cpu_traces_dir.glob("*/*.json.gz"), *gloo_traces_dir.glob("*/*.json.gz")])
    assert len(paths) == 3
    for path in paths:
        fs, fs_path = filesystem(str(path))
        trace = TraceFile(str(path), path.parent.name, trace_id_for(path.name), path.stat().st_size)
        parsed = parse_trace(fs, fs_path, trace, workdir=tmp_path / trace.trace_id, settings=ParseSettings())
        assert parsed.event_count > 0
        assert not [i for i in parsed.issues if i.severity == "error"], parsed.issues
        assert parsed.rank.rank == int(path.name.split(".")[0].removeprefix("rank-"))
        if path.parent.name == GLOO_RUN_ID:
            assert parsed.rank.source == "distributedInfo" and parsed.distributed["world_size"] == 2
        rows = {name: pq.read_table(file) for name, file in parsed.table_files.items()}
        for table in ("cpu_ops", "memory_events", "steps", "annotations"):
            assert rows[table].num_rows > 0, (path, table)
        assert sorted(rows["steps"].column("step").to_pylist()) == ACTIVE_STEPS
