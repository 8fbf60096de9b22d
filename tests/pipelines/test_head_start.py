"""A trace's parse started ahead is taken over by the step that stages it, only with the same file and settings,
and its scratch folder goes once taken, or once discarded and ended."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest

from pipelines.head_start import discard_parses_ahead, parse_ahead, parsed_trace
from pipelines.identity import TraceFile
from pipelines.parse import ParseSettings
from pipelines.scratch import PREFIX
from tests.support.parsed import parse_file, table_differences
from tests.support.servers import EXAMPLE_TRACES

SOURCE = next((EXAMPLE_TRACES / "rocm_mi250").glob("*.json.gz"))


@pytest.fixture
def scratch_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "scratch"))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    (tmp_path / "scratch").mkdir()
    return tmp_path / "scratch"


def _trace(path: Path) -> TraceFile:
    stat = path.stat()
    return TraceFile(url=str(path), run_id="r", trace_id="t", size_bytes=stat.st_size, modified=stat.st_mtime)


def _parse_folders(root: Path) -> set[Path]:
    return set(root.glob(f"{PREFIX}{os.getpid()}-parse-*"))


def test_the_parse_started_ahead_is_the_one_taken_and_is_the_same_as_a_parse_of_its_own(
    scratch_root: Path, tmp_path: Path
) -> None:
    trace, settings = _trace(SOURCE), ParseSettings(threads=1)
    parse_ahead(trace, None, settings)
    (ahead_folder,) = _parse_folders(scratch_root)
    with parsed_trace(trace, None, settings) as (parsed, _):
        assert parsed.event_count > 0 and not [i for i in parsed.issues if i.severity == "error"]
        assert all(path.is_relative_to(ahead_folder) for path in parsed.table_files.values())
        assert _parse_folders(scratch_root) == {ahead_folder}  # no second parse started
        assert table_differences(parsed, parse_file(SOURCE, tmp_path / "own", settings)) == {}
    assert not _parse_folders(scratch_root)
    with parsed_trace(trace, None, settings) as (again, _):  # taken once: the next asks parse anew
        assert not any(path.is_relative_to(ahead_folder) for path in again.table_files.values())


def test_other_settings_or_a_changed_file_parse_anew_and_the_unused_parse_is_discarded(
    scratch_root: Path, tmp_path: Path
) -> None:
    trace, settings = _trace(SOURCE), ParseSettings(threads=1)
    parse_ahead(trace, None, settings)
    (ahead_folder,) = _parse_folders(scratch_root)
    for other_trace, other_settings in ((trace, replace(settings, chunk_bytes=1 << 20)),
                                        (replace(trace, size_bytes=trace.size_bytes + 1), settings)):
        with parsed_trace(other_trace, None, other_settings) as (parsed, _):
            assert parsed.event_count > 0
            assert not any(path.is_relative_to(ahead_folder) for path in parsed.table_files.values())
    assert _parse_folders(scratch_root) == {ahead_folder}
    discard_parses_ahead()  # returns at once; the folder goes when its parse ends
    deadline = time.monotonic() + 120
    while _parse_folders(scratch_root) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _parse_folders(scratch_root)
