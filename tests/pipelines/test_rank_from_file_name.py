"""A number in a trace's file name is its rank only where that is plausible.

TraceLens' test traces (AMD-AGI/TraceLens, tests/traces/h100 and tests/traces/mi300, e.g.
``Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz``) are single-GPU inference traces without ``distributedInfo`` whose file
names end in a job id; it became rank 1,016,005 in every table. The traces here are small hand-written ones of that
pattern (no ``distributedInfo``, the number after ``__``), ingested as a user would.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from pipelines.lake.lake import Lake
from pipelines.lake.read import open_lake
from pipelines.sources import discover_runs
from transforms.composition.ingest import ingest_run

BASE_NS = 1_751_410_836_000_000_000


def write_trace(path: Path, distributed: dict | None = None) -> None:
    """A minimal trace: one ProfilerStep, an aten op inside it, and the kernel it launched."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 7, "tid": 7, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 7, "ts": 10, "dur": 20,
         "args": {"External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 40, "dur": 30,
         "args": {"External id": 1, "correlation": 5, "device": 0, "stream": 7}},
    ]
    trace = {"schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": BASE_NS}
    if distributed is not None:
        trace["distributedInfo"] = distributed
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(json.dumps(trace).encode()))


def ingested_ranks(source: Path, lake_dir: Path) -> dict[str, tuple[int, str, str | None]]:
    """trace_id → (rank, rank_source, the rank_not_in_trace note) after ingesting every run under ``source``."""
    lake = Lake(str(lake_dir))
    for run in discover_runs(str(source)):
        ingest_run(run, lake, select={"runs"})
    con = open_lake(str(lake_dir))
    rows = con.sql("""
        select t.trace_id, t.rank, t.rank_source, q.message
        from traces as t
        left join quality_issues as q on q.trace_id = t.trace_id and q.code = 'rank_not_in_trace'
    """).fetchall()
    return {trace_id: (rank, source, note) for trace_id, rank, source, note in rows}


def test_a_job_id_in_the_file_name_is_not_a_rank(tmp_path: Path) -> None:
    write_trace(tmp_path / "src" / "qwen" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")

    ranks = ingested_ranks(tmp_path / "src", tmp_path / "lake")

    rank, source, note = ranks["Qwen_Qwen1.5-0.5B-Chat__1016005"]
    assert (rank, source) == (0, "default")
    assert "1016005" in note and "rank 0 assumed" in note


def test_bare_numbers_within_the_world_size_are_ranks(tmp_path: Path) -> None:
    """Two files ``job_0``/``job_1`` of one run (2 files: ranks 0 and 1 are plausible); a file whose trace says
    ``world_size`` 8 but not its rank (number 5 < 8); a rank marker is taken whatever its number."""
    for rank in (0, 1):
        write_trace(tmp_path / "src" / "pair" / f"job_{rank}.json.gz")
    write_trace(tmp_path / "src" / "sized" / "trace_5.json.gz", {"backend": "nccl", "world_size": 8})
    write_trace(tmp_path / "src" / "marked" / "rank-1016005.json.gz")

    ranks = ingested_ranks(tmp_path / "src", tmp_path / "lake")

    assert ranks["job_0"][:2] == (0, "file_name") and ranks["job_1"][:2] == (1, "file_name")
    assert ranks["trace_5"][:2] == (5, "file_name")
    assert ranks["rank-1016005"][:2] == (1016005, "file_name")
    assert "rank 1 taken from the file name" in ranks["job_1"][2]
