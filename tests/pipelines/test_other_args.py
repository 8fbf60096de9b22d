"""``other_args`` keeps every args key no typed column reads: per event, the typed keys and other_args together are
exactly the event's args, with the values unchanged (shared traces: HTA test data, MIT; tb_plugin samples, BSD)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import duckdb
import fsspec
import pytest

from pipelines.identity import TraceFile
from pipelines.parse import ParseSettings, parse_trace
from pipelines.schema import KEY_RENAMES
from pipelines.tables import ARGS_USED, EVENT_TABLES


@pytest.mark.parametrize("trace", ["rocm_mi250/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
                                   "edge_cases/distributed_info_not_found.json.gz"])
def test_typed_keys_and_other_args_are_the_args(shared_traces: Path, tmp_path: Path, trace: str) -> None:
    path = shared_traces / trace
    raw = gzip.decompress(path.read_bytes())
    for old, new in KEY_RENAMES.items():
        raw = raw.replace(old, new)
    events = json.loads(raw)["traceEvents"]
    info = TraceFile(url=str(path), run_id="r", trace_id="t", size_bytes=path.stat().st_size)
    parsed = parse_trace(fsspec.filesystem("file"), str(path), info, workdir=tmp_path, settings=ParseSettings())
    checked = kept = 0
    for table in EVENT_TABLES:
        rows = duckdb.sql(f"select event_idx, other_args from '{parsed.table_files[table]}'").fetchall()
        for event_idx, other_args in rows:
            args = events[event_idx].get("args") or {}
            other = json.loads(other_args) if other_args is not None else {}
            typed = {key: value for key, value in args.items() if key in ARGS_USED[table]}
            assert {**typed, **other} == args and not set(typed) & set(other), (table, events[event_idx])
            checked += 1
            kept += bool(other)
    assert checked == len(events) and kept > 0
