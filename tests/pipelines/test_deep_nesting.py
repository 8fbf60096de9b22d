"""An event that nests deeper than ``MAX_EVENT_DEPTH`` is dropped before DuckDB decodes it, in libkineto's layout
and in any other, and reported as ``deeply_nested_event``: DuckDB's JSON reader crashed the whole ingest on an
event whose args nest 200,000 deep (issue 40). An event at the limit is read, through the repair path too."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest

from pipelines.identity import TraceFile
from pipelines.jsonscan import max_depth
from pipelines.jsonstream import MAX_EVENT_DEPTH
from pipelines.lake.read import open_lake
from pipelines.parse import ParsedTrace, ParseSettings, parse_trace
from tests.support.servers import EXAMPLE_TRACES, ROOT


def _event(name: str, ts: int, args: str = '{"External id": 1}') -> str:
    return (f'{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 1, "ts": {ts}, "dur": 5, '
            f'"args": {args}}}')


def _nested(levels: int) -> str:
    """args that nest ``levels`` deep under the event (the event is level 1, its args 2)."""
    return '{"x": ' + "[" * (levels - 2) + "]" * (levels - 2) + "}"


def _trace(events: list[str], layout: str, rank: int) -> bytes:
    """A trace holding ``events``, in libkineto's pretty-printed layout or as one compact line."""
    if layout == "kineto":  # each event opens on its own line at two spaces, "\n  },\n  {" between them
        body = ",\n  ".join(event[:-1] + "\n  }" if event.startswith("{") else event for event in events)
        text = f'{{\n  "schemaVersion": 1,\n  "distributedInfo": {{"rank": {rank}}},\n  "traceEvents": [\n  {body}\n  ]\n}}'
    else:
        text = f'{{"schemaVersion": 1, "distributedInfo": {{"rank": {rank}}}, "traceEvents": [{", ".join(events)}]}}'
    return text.encode()


def _parse(path: Path, tmp: Path, chunk_bytes: int = ParseSettings.chunk_bytes) -> ParsedTrace:
    trace = TraceFile(str(path), "run", path.stem, path.stat().st_size)
    settings = ParseSettings(chunk_bytes=chunk_bytes)
    return parse_trace(fsspec.filesystem("file"), str(path), trace, workdir=tmp / "work", settings=settings)


def test_an_ingest_with_a_deeply_nested_event_lands_every_other_trace_and_run(tmp_path: Path) -> None:
    deep = _event("deep", 20, _nested(200_000))  # a 400 KB event, as the issue's 650 KB file
    events = [_event("aten::add", 10), deep, _event("aten::mul", 30)]
    run = tmp_path / "traces" / "nested"
    run.mkdir(parents=True)
    (run / "rank-0.json").write_bytes(_trace(events, "kineto", 0))
    (run / "rank-1.json.gz").write_bytes(gzip.compress(_trace(events, "compact", 1)))
    shutil.copytree(EXAMPLE_TRACES / "simple_add", tmp_path / "traces" / "simple_add",
                    ignore=shutil.ignore_patterns("*.md"))
    lake = tmp_path / "lake"

    done = subprocess.run([sys.executable, "-m", "tracelake.cli", "ingest", str(tmp_path / "traces"),
                           "--lake", str(lake), "--jobs", "1"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})

    assert done.returncode == 1, done.stdout + done.stderr  # events were dropped: an error, never a crash
    assert "Traceback" not in done.stderr and "ingested 2 runs" in done.stdout, done.stdout + done.stderr
    con = open_lake(str(lake))
    issues = con.execute("select trace_id, severity, count, message from quality_issues "
                         "where code = 'deeply_nested_event' order by trace_id").fetchall()
    assert [(trace, severity, count) for trace, severity, count, _ in issues] == [
        ("rank-0", "error", 1), ("rank-1", "error", 1)]
    assert f"MAX_EVENT_DEPTH = {MAX_EVENT_DEPTH}" in issues[0][3]
    ops = con.execute("select rank, list(name order by ts_ns) from cpu_ops where run_id = 'nested' "
                      "group by rank order by rank").fetchall()
    assert ops == [(0, ["aten::add", "aten::mul"]), (1, ["aten::add", "aten::mul"])]
    assert con.execute("select count(*) from kernels where run_id = 'simple_add'").fetchone()[0] > 0


@pytest.mark.parametrize("layout", ["kineto", "compact"])
@pytest.mark.parametrize("repaired", [False, True])
@pytest.mark.parametrize("chunk_bytes", [ParseSettings.chunk_bytes, 512])  # read whole, or cut between events
def test_an_event_at_the_limit_is_read_and_one_level_more_is_dropped(
    tmp_path: Path, layout, repaired, chunk_bytes
) -> None:
    events = [_event("at_limit", 10, _nested(MAX_EVENT_DEPTH)), _event("over_limit", 20, _nested(MAX_EVENT_DEPTH + 1)),
              _event("aten::add", 30)]
    if repaired:  # a null entry makes DuckDB read the chunk as a row of nulls: the chunk goes through the repair
        events.insert(0, "null")
    path = tmp_path / "rank-0.json"
    path.write_bytes(_trace(events, layout, 0))
    parsed = _parse(path, tmp_path, chunk_bytes)
    issues = {issue.code: issue.count for issue in parsed.issues}
    assert parsed.event_count == 2
    assert issues["deeply_nested_event"] == 1
    assert issues.get("not_an_object") == (1 if repaired else None)
    assert "unparseable_events" not in issues


def test_a_deeply_nested_key_after_the_events_is_lost_not_the_events(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_bytes(b'{"schemaVersion": 1, "traceEvents": [' + _event("aten::add", 10).encode()
                     + b'], "deviceProperties": ' + b"[" * 200_000 + b"]" * 200_000 + b"}")
    parsed = _parse(path, tmp_path)
    assert parsed.event_count == 1 and parsed.schema_version == 1  # the keys before the events still read
    assert "truncated_json" in {issue.code for issue in parsed.issues}  # those after did not: reported, not raised


def test_every_shared_trace_nests_far_below_the_limit(shared_traces: Path) -> None:
    for path in sorted(shared_traces.rglob("*.json*")):
        text = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        assert max_depth(text) <= 10, path  # the document, traceEvents, the event, its args, a list of shapes...
