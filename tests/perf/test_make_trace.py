"""The benchmark's repeated trace is a consistent trace: ids, flows and steps continue across copies."""

from __future__ import annotations

import gzip
import io
from collections import Counter

import orjson
import pytest

from bench.make_trace import DEFAULT_SOURCE, write_trace

pytestmark = pytest.mark.skipif(not DEFAULT_SOURCE.exists(), reason="shared traces not found")


def test_copies_shift_time_and_offset_ids_consistently() -> None:
    out = io.BytesIO()
    copies, written = write_trace(DEFAULT_SOURCE, out, 30_000_000)
    document = orjson.loads(out.getvalue())
    events = document["traceEvents"]

    assert copies == 3 and written == len(out.getvalue())
    steps = [e["name"] for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    assert len(steps) == len(set(steps)) == 3 * 3
    launches = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime"}
    flows = [e["id"] for e in events if e.get("cat") == "ac2g"]
    assert set(flows) <= launches
    external = Counter(e["args"]["External id"] for e in events if e.get("cat") == "cpu_op")
    assert max(external.values()) == 1
    assert sum(e["ph"] == "M" for e in events) == sum(e["ph"] == "M" for e in _source_events())
    span = next(e for e in events if e.get("cat") == "Trace")
    source_span = next(e for e in _source_events() if e.get("cat") == "Trace")
    assert span["ts"] == source_span["ts"] and span["dur"] > 3 * source_span["dur"]  # stretched over the copies


def _source_events() -> list[dict]:
    with gzip.open(DEFAULT_SOURCE) as f:
        return orjson.loads(f.read())["traceEvents"]
