"""The parser's checks of kernel launches: ``no_device_activity`` (launches recorded, no device events) on a trace
derived from a real one by dropping its device events, and ``degenerate_external_ids`` (runtime calls carrying
their correlation id as External id) on a 2023 trace (HTA's test data, MIT: simple_add), neither on a modern one."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import fsspec

from pipelines.identity import TraceFile
from pipelines.parse import ParseSettings, parse_trace

DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


def _issues(path: Path, workdir: Path) -> dict:
    trace = TraceFile(url=str(path), run_id="r", trace_id="t", size_bytes=path.stat().st_size)
    parsed = parse_trace(fsspec.filesystem("file"), str(path), trace, workdir=workdir, settings=ParseSettings())
    return {issue.code: issue for issue in parsed.issues}


def test_launches_without_device_events(shared_traces: Path, tmp_path: Path) -> None:
    source = shared_traces / "nccl_rank0_of_2" / "rank-0.json.gz"
    trace = json.loads(gzip.decompress(source.read_bytes()))
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") not in DEVICE_CATEGORIES]
    launches = sum(1 for e in trace["traceEvents"]
                   if e.get("cat") == "cuda_runtime" and e["name"] in ("cudaLaunchKernel", "cudaLaunchKernelExC"))
    derived = tmp_path / "no_activity.json"
    derived.write_text(json.dumps(trace))

    issues = _issues(derived, tmp_path / "work")
    assert launches > 2000
    assert (issues["no_device_activity"].severity, issues["no_device_activity"].count) == ("warning", launches)
    assert "no_device_activity" not in _issues(source, tmp_path / "work_source")


def test_degenerate_external_ids(shared_traces: Path, tmp_path: Path) -> None:
    issues = _issues(shared_traces / "simple_add" / "benchmark_result_493459_1694039959_trace.json.gz", tmp_path / "a")
    assert issues["degenerate_external_ids"].count == 331
    assert "no_device_activity" not in issues
    assert "degenerate_external_ids" not in _issues(shared_traces / "nccl_rank0_of_2" / "rank-0.json.gz", tmp_path / "b")
