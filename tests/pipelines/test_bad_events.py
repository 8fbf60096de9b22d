"""One bad event costs only itself: every other event lands, the bad one is kept with what could be read
(or dropped alone), and its problem is one quality issue with a precise code and a count.

Each bad event is put into a real trace in both layouts the parser meets: libkineto's pretty-printed one
(cut into several chunks here, so that the bad event sits in a middle chunk) and compact one-line JSON.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import duckdb
import fsspec
import pytest

from pipelines.identity import TraceFile
from pipelines.parse import ParsedTrace, ParseSettings, parse_trace
from pipelines.tables import EVENT_TABLES

# A ROCm trace as libkineto pretty-prints it (220 events), and a compact one-line trace (33 events).
PRETTY = "rocm_mi250/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
COMPACT = "edge_cases/tiny_base.json.gz"
SETTINGS = ParseSettings(chunk_bytes=16 << 10, threads=2)  # ~6 chunks of the pretty trace

KERNEL = (
    b'{"ph": "X", "cat": "kernel", "name": "bad-event", "pid": 1, "tid": 7, "ts": 100, "dur": 5,'
    b' "args": {"device": 0, "stream": 7, "correlation": 99, "grid": [1, 1, 1], "block": [64, 1, 1]}}'
)
MEMORY = b'{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 100, "s": "t",' \
         b' "args": {"Bytes": -512, "Total Allocated": -512, "Total Reserved": 2048, "Device Id": 0, "Device Type": 1}}'


@dataclass(frozen=True)
class Case:
    entry: bytes
    code: str
    kept: bool  # the event lands (in kernels, as "bad-event…"), or is dropped
    expect: str = "true"  # SQL over the kept event's kernels row that must hold


CASES = {
    "nan_dur": Case(KERNEL.replace(b'"dur": 5', b'"dur": NaN'), "nan_token", True, "dur_ns is null and ts_ns is not null"),
    "infinity_ts": Case(KERNEL.replace(b'"ts": 100', b'"ts": -Infinity'), "nan_token", True, "ts_ns is null"),
    "string_ts": Case(KERNEL.replace(b'"ts": 100', b'"ts": "abc"'), "bad_type", True, "ts_ns is null and dur_ns = 5000"),
    "huge_ts": Case(KERNEL.replace(b'"ts": 100', b'"ts": 1e30'), "bad_number", True, "ts_ns is null"),
    "30_digit_dur": Case(KERNEL.replace(b'"dur": 5', b'"dur": ' + b"9" * 30), "bad_number", True, "dur_ns is null"),
    "boolean_dur": Case(KERNEL.replace(b'"dur": 5', b'"dur": true'), "bad_type", True, "dur_ns is null"),
    "number_entry": Case(b"42", "not_an_object", False),
    "string_entry": Case(b'"str"', "not_an_object", False),
    "null_entry": Case(b"null", "not_an_object", False),
    "list_entry": Case(b"[1, 2]", "not_an_object", False),
    "lone_surrogate": Case(KERNEL.replace(b'"bad-event"', b'"bad-event\\ud800"'), "invalid_surrogate", True,
                           "name = 'bad-event\ufffd'"),
    "duplicate_key": Case(KERNEL.replace(b'"dur": 5', b'"dur": 5, "dur": 6'), "duplicate_key", True, "dur_ns = 6000"),
    "string_grid": Case(KERNEL.replace(b"[1, 1, 1]", b'"abc"'), "bad_arg", True,
                        "grid_x is null and block_x = 64 and correlation = 99"),
    "missing_ts": Case(KERNEL.replace(b'"ts": 100, ', b""), "missing_ts", True, "ts_ns is null"),
    "missing_dur": Case(KERNEL.replace(b', "dur": 5', b""), "missing_dur", True, "dur_ns is null"),
    "negative_ts": Case(KERNEL.replace(b'"ts": 100', b'"ts": -100'), "negative_ts", True, "ts_ns is not null"),
    "negative_dur": Case(KERNEL.replace(b'"dur": 5', b'"dur": -5'), "negative_dur", True, "dur_ns = -5000"),
    "negative_memory_total": Case(MEMORY, "negative_bytes", False),  # kept, in memory_events
}

# what the shared traces these tests edit report of themselves (a 2023 trace's External ids are correlation ids)
_TRACE_OWN = {"rank_not_in_trace", "degenerate_external_ids"}


def _layouts(shared_traces: Path) -> dict[str, bytes]:
    return {
        layout: gzip.decompress((shared_traces / name).read_bytes()) for layout, name in (("pretty", PRETTY), ("compact", COMPACT))
    }


def with_entry(text: bytes, entry: bytes, layout: str) -> bytes:
    """``text`` with ``entry`` put among its events: in the middle (pretty), after the first (compact)."""
    if layout == "pretty":
        cut = text.find(b"\n  },\n  {", len(text) // 2) + len(b"\n  },")
        return text[:cut] + b"\n  " + entry + b"," + text[cut:]
    cut = text.find(b"}}, {") + len(b"}},")
    return text[:cut] + b" " + entry + b"," + text[cut:]


def parse(path: Path, workdir: Path) -> ParsedTrace:
    trace = TraceFile(url=str(path), run_id="r", trace_id="t", size_bytes=path.stat().st_size)
    return parse_trace(fsspec.filesystem("file"), str(path), trace, workdir=workdir, settings=SETTINGS)


def table_counts(parsed: ParsedTrace) -> dict[str, int]:
    con = duckdb.connect()
    return {
        table: con.execute("select count(*) from read_parquet($p)", {"p": str(parsed.table_files[table])}).fetchone()[0]
        for table in EVENT_TABLES
    }


@pytest.fixture(scope="module")
def clean(shared_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, int]]:
    """Rows per table of each unmodified trace."""
    counts = {}
    for layout, text in _layouts(shared_traces).items():
        root = tmp_path_factory.mktemp(layout)
        (root / "t.json").write_bytes(text)
        counts[layout] = table_counts(parse(root / "t.json", root / "work"))
    return counts


@pytest.mark.parametrize("layout", ["pretty", "compact"])
@pytest.mark.parametrize("name", CASES)
def test_a_bad_event_costs_only_itself(
    name: str, layout: str, shared_traces: Path, clean: dict[str, dict[str, int]], tmp_path: Path
) -> None:
    case = CASES[name]
    path = tmp_path / "t.json"
    path.write_bytes(with_entry(_layouts(shared_traces)[layout], case.entry, layout))
    parsed = parse(path, tmp_path / "work")

    issues = {i.code: i for i in parsed.issues if i.code not in _TRACE_OWN}
    assert set(issues) == {case.code}, [(i.code, i.message) for i in parsed.issues]
    assert issues[case.code].count == 1
    assert issues[case.code].severity == ("warning" if case.kept or name == "negative_memory_total" else "error")
    counts = table_counts(parsed)
    added = {"kernels": 1} if case.kept else {"memory_events": 1} if name == "negative_memory_total" else {}
    assert counts == {table: n + added.get(table, 0) for table, n in clean[layout].items()}
    assert parsed.event_count == sum(counts.values())
    con = duckdb.connect()
    kernels = str(parsed.table_files["kernels"])
    assert con.execute("select count(distinct event_idx) = count(*) from read_parquet($p)", {"p": kernels}).fetchone()[0]
    if case.kept:
        row = con.execute(
            f"select {case.expect} from read_parquet($p) where name like 'bad-event%'", {"p": kernels}
        ).fetchall()
        assert row == [(True,)]


def test_a_broken_event_is_dropped_alone(shared_traces: Path, clean: dict[str, dict[str, int]], tmp_path: Path) -> None:
    """Text that is no JSON at all between two pretty-printed events loses that event only."""
    path = tmp_path / "t.json"
    path.write_bytes(with_entry(_layouts(shared_traces)["pretty"], b'{"ph": "X", "name": oops}', "pretty"))
    parsed = parse(path, tmp_path / "work")
    assert [(i.code, i.count) for i in parsed.issues if i.code not in _TRACE_OWN] == [("malformed_event", 1)]
    assert table_counts(parsed) == clean["pretty"]
