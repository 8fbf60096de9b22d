"""The CPU workloads write real, well-formed Kineto traces that the parser reads; gloo ranks really wait."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from torch.profiler._trace_validator import validate_trace

from pipelines.identity import TraceFile, trace_id_for
from pipelines.parse import ParseSettings, parse_trace
from pipelines.storage import filesystem
from tracelake.workloads import (
    CPU_RUN_ID,
    GLOO_RUN_ID,
    PARALLEL_GROUPS_RUN_ID,
    profile_parallel_groups_job,
    profile_pipeline_job,
)

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
    assert all(s > f + 1000 for s, f in zip(extra, idle, strict=False)), (extra, idle)  # µs: rank 1 does more every step

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


# The multi-rank layouts of large-model training: tensor x data parallel groups, and pipeline stages.

PARALLEL_STEPS = [2, 3]  # schedule(wait=1, warmup=1, active=2) over 4 steps


@pytest.fixture(scope="module")
def parallel_groups_traces(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    root = tmp_path_factory.mktemp("parallel_groups")
    profile_parallel_groups_job(str(root))
    files = sorted(p.name for p in (root / PARALLEL_GROUPS_RUN_ID).iterdir())
    assert files == [f"rank-{r}.step4.pt.trace.json.gz" for r in range(4)]
    return [_load(root / PARALLEL_GROUPS_RUN_ID / name) for name in files]


def _contains(outer: dict[str, Any], inner: dict[str, Any]) -> bool:
    """Whether ``inner`` lies within ``outer`` on the same thread."""
    same_thread = outer["tid"] == inner["tid"]
    end = outer["ts"] + outer["dur"]
    return same_thread and outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= end


def test_parallel_groups_job_describes_a_2x2_layout_of_tp_and_dp_groups(parallel_groups_traces) -> None:
    for rank, trace in enumerate(parallel_groups_traces):
        groups = {g["pg_desc"]: g["ranks"] for g in trace["distributedInfo"]["pg_config"]}
        tp, dp = [rank // 2 * 2, rank // 2 * 2 + 1], [rank % 2, rank % 2 + 2]
        assert groups == {"default_pg": [0, 1, 2, 3], "TP": tp, "DP": dp}


def test_parallel_groups_job_communicates_in_forward_backward_and_optimizer(parallel_groups_traces) -> None:
    for trace in parallel_groups_traces:
        spans = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
        calls = [e for e in spans if e["name"] == "c10d::allreduce_"]
        backward = [e for e in spans if e["name"].startswith("autograd::engine::evaluate_function: ")]
        optimizer = [e for e in spans if e["name"] == "Optimizer.step#SGD.step"]
        in_backward = [c for c in calls if any(_contains(b, c) for b in backward)]
        in_optimizer = [c for c in calls if any(_contains(o, c) for o in optimizer)]
        # Per step: forward: 1 TP all-reduce, then 1 DP (the loss); backward: 1 TP (input gradient) + 4 DP (one per
        # parameter), async; the optimizer step: 1 TP (the squared gradient norm).
        assert (len(calls), len(in_backward), len(in_optimizer)) == (16, 10, 2)
        assert sorted(c["args"]["Concrete Inputs"][4] for c in in_backward) == ["False"] * 2 + ["True"] * 8
        # Each call's collective runs as a gloo:all_reduce range on a gloo worker thread, not the caller's.
        runs = [e for e in spans if e["name"] == "gloo:all_reduce"]
        assert len(runs) == len(calls) and not {e["tid"] for e in runs} & {c["tid"] for c in calls}
        assert {str(e["args"]["Input Dims"]) for e in runs} == {str(c["args"]["Input Dims"][0]) for c in calls}


@pytest.fixture(scope="module")
def pipeline_traces(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, str], list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("pipeline")
    traces = {}
    for stages, schedule_name in ((2, "gpipe"), (4, "1f1b")):
        run_id = f"pp{stages}_{schedule_name}"
        profile_pipeline_job(
            str(root), run_id=run_id, stages=stages, schedule_name=schedule_name, microbatches=4
        )
        traces[stages, schedule_name] = [
            _load(root / run_id / f"rank-{r}.step3.pt.trace.json.gz") for r in range(stages)
        ]
    return traces


def test_pipeline_stages_exchange_each_micro_batch_with_their_neighbours(pipeline_traces) -> None:
    for (stages, schedule_name), traces in pipeline_traces.items():
        for rank, trace in enumerate(traces):
            spans = sorted((e for e in trace["traceEvents"] if e.get("ph") == "X"), key=lambda e: e["ts"])
            assert [e["name"] for e in spans if e["name"].startswith("ProfilerStep#")] == ["ProfilerStep#2"]
            p2p = [e for e in spans if e["name"] in ("c10d::send", "c10d::recv_")]
            # Concrete Inputs: (tensors, group, peer's group rank, tag); each micro-batch crosses each boundary
            # once forward (activations) and once backward (gradients).
            peers = [int(e["args"]["Concrete Inputs"][2]) for e in p2p]
            neighbours = [r for r in (rank - 1, rank + 1) if 0 <= r < stages]
            assert sorted(peers) == sorted(neighbours * 2 * 4), (stages, schedule_name, rank)
            assert (p2p[0]["name"] == "c10d::send") == (rank == 0)  # only the first stage starts by sending
            # Each call has its gloo:send/gloo:recv range on the same thread, starting inside the call.
            ranges = [e for e in spans if e["name"] in ("gloo:send", "gloo:recv")]
            assert len(ranges) == len(p2p)
            for call, work in zip(p2p, ranges, strict=False):
                assert work["tid"] == call["tid"] and call["ts"] <= work["ts"] <= call["ts"] + call["dur"]
            if schedule_name == "gpipe":
                annotations = {e["name"] for e in spans if e.get("cat") == "user_annotation"}
                assert {f"{kind} {i}" for kind in ("Forward", "Backward") for i in range(4)} <= annotations


def test_multi_rank_traces_pass_torch_trace_validator(tmp_path: Path) -> None:
    profile_pipeline_job(str(tmp_path), run_id="pp", stages=2, microbatches=2)
    for path in (tmp_path / "pp").glob("*.json.gz"):
        passed, violations = validate_trace(str(path))
        assert passed, (path, [str(v) for v in violations])
