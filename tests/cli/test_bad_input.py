"""Bad trace files through the command line: one clear line each, a row in traces and quality_issues,
a non-zero exit, and every good trace of the same and other runs still lands."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from tests.cli.conftest import sql_rows, tracelake

GOOD = "nccl_rank0_of_2/rank-0.json.gz"


@pytest.fixture(scope="module")
def bad_source(tmp_path_factory: pytest.TempPathFactory, shared_traces: Path) -> Path:
    """Run ``mixed`` holds one good trace and one file of each kind of bad input; run ``good`` is clean."""
    root = tmp_path_factory.mktemp("source")
    mixed, good = root / "mixed", root / "good"
    mixed.mkdir()
    good.mkdir()
    shutil.copy(shared_traces / GOOD, mixed / "rank-0.json.gz")
    shutil.copy(shared_traces / "simple_add/alexnet_trace.json.gz", good / "rank-0.json.gz")
    text = gzip.decompress((shared_traces / GOOD).read_bytes())
    # A process killed mid-write: the JSON stops inside an event, 60 % of the way through.
    (mixed / "rank-1.json").write_bytes(text[: int(len(text) * 0.6)])
    # Corrupt gzip: a valid header, then damaged deflate data.
    packed = bytearray(gzip.compress(text))
    packed[len(packed) // 2 : len(packed) // 2 + 64] = b"\x00" * 64
    (mixed / "rank-2.json.gz").write_bytes(bytes(packed))
    (mixed / "rank-3.json").write_bytes(b"")
    shutil.copy(shared_traces / "edge_cases/not_kineto_execution_trace.json.gz", mixed / "rank-4.json.gz")
    # Non-UTF-8 bytes inside a name string of an otherwise good trace.
    tiny = gzip.decompress((shared_traces / "edge_cases/tiny_base.json.gz").read_bytes())
    (mixed / "rank-5.json").write_bytes(tiny.replace(b'"aten::zeros"', b'"aten::\xff\xfezeros"', 1))
    (mixed / "rank-6.json").write_bytes(b'{"schemaVersion": 1, "traceEvents": []}')
    return root


@pytest.fixture(scope="module")
def ingested(bad_source: Path, tmp_path_factory: pytest.TempPathFactory):
    lake = tmp_path_factory.mktemp("lake")
    return lake, tracelake("ingest", str(bad_source), "--lake", str(lake))


EXPECTED_ERRORS = {
    "rank-1.json": "truncated_json",
    "rank-2.json.gz": "corrupt_gzip",
    "rank-3.json": "empty_file",
    "rank-4.json.gz": "not_a_kineto_trace",
    "rank-5.json": "invalid_utf8",
    "rank-6.json": "no_events",
}


def test_exit_code_is_non_zero(ingested) -> None:
    _, done = ingested
    assert done.code == 1, done.stdout + done.stderr


@pytest.mark.parametrize(("file_name", "code"), EXPECTED_ERRORS.items())
def test_one_clear_line_per_bad_file(ingested, file_name: str, code: str) -> None:
    _, done = ingested
    lines = [line for line in done.stdout.splitlines() if line.startswith("ERROR") and f"/{file_name}:" in line]
    assert len(lines) == 1, done.stdout
    assert lines[0].endswith(f"[{code}]")


def test_every_file_has_a_traces_row_and_its_quality_issue(ingested) -> None:
    lake, _ = ingested
    traces = {r["trace_id"]: r for r in sql_rows(lake, "select * from traces where run_id = 'mixed'")}
    assert set(traces) == {"rank-0", "rank-1", "rank-2", "rank-3", "rank-4", "rank-5", "rank-6"}
    issues = sql_rows(lake, "select trace_id, severity, code, message from quality_issues where run_id = 'mixed'")
    for file_name, code in EXPECTED_ERRORS.items():
        trace_id = file_name.split(".")[0]
        assert any(i["trace_id"] == trace_id and i["code"] == code and i["severity"] == "error" for i in issues)
    assert traces["rank-0"]["status"] == "ok"
    assert traces["rank-3"]["status"] == traces["rank-4"]["status"] == traces["rank-6"]["status"] == "failed"


def test_good_traces_of_the_same_and_other_runs_land(ingested, shared_traces: Path) -> None:
    lake, _ = ingested
    counts = {
        (r["run_id"], r["trace_id"]): r["n"]
        for r in sql_rows(lake, "select run_id, trace_id, count(*) as n from kernels group by all")
    }
    assert counts[("mixed", "rank-0")] == 2700  # every kernel of the good NCCL trace
    assert counts[("good", "rank-0")] == 79


def test_truncated_and_corrupt_traces_keep_their_complete_events(ingested) -> None:
    lake, _ = ingested
    traces = {r["trace_id"]: r for r in sql_rows(lake, "select * from traces where run_id = 'mixed'")}
    issues = sql_rows(lake, "select * from quality_issues where run_id = 'mixed' and code = 'salvaged_events'")
    salvaged = {i["trace_id"]: i["count"] for i in issues}
    for trace_id in ("rank-1", "rank-2"):
        assert traces[trace_id]["status"] == "partial"
        assert 0 < traces[trace_id]["event_count"] < traces["rank-0"]["event_count"]
        assert salvaged[trace_id] == traces[trace_id]["event_count"]
    # The file with invalid bytes keeps every event, the bad bytes replaced.
    names = sql_rows(lake, "select name from cpu_ops where run_id = 'mixed' and trace_id = 'rank-5' and name like 'aten::%zeros'")
    assert names == [{"name": "aten::\ufffd\ufffdzeros"}]


def test_a_memory_limit_too_small_to_parse_says_so_and_the_run_still_lands(tmp_path: Path, shared_traces: Path) -> None:
    """The parse's share of a 100MB limit cannot hold the JSON reader's buffer: the trace's error names the
    setting, once, and the run lands with its traces row and no analysis tables (no second error about them)."""
    source = tmp_path / "source" / "small"
    source.mkdir(parents=True)
    shutil.copy(shared_traces / GOOD, source / "rank-0.json.gz")
    lake = tmp_path / "lake"
    done = tracelake("ingest", str(source.parent), "--lake", str(lake), "--no-record", "--memory-limit", "100MB")
    assert done.code == 1, done.stdout + done.stderr
    output = done.stdout + done.stderr
    errors = [line for line in output.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and "rank-0.json.gz" in errors[0] and "--memory-limit" in errors[0], output
    assert "Traceback" not in output
    issues = sql_rows(lake, "select code, message from quality_issues")
    assert [i["code"] for i in issues] == ["parse_failed"] and "out of memory" in issues[0]["message"]
    assert sql_rows(lake, "select status from traces") == [{"status": "failed"}]
