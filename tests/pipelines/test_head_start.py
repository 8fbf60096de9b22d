"""A trace's parse started ahead is taken over by the step that stages it, only with the same file and settings,
and its scratch folder goes once taken, or once discarded and ended."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
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


@dataclass(frozen=True)
class Ahead:
    trace: TraceFile
    settings: ParseSettings
    folder: Path


@pytest.fixture
def ahead(scratch_root: Path) -> Iterator[Ahead]:
    """The example trace's parse started ahead, and its scratch folder; let go of at the end whatever the test did."""
    trace, settings = _trace(SOURCE), ParseSettings(threads=1)
    parse_ahead(trace, None, settings)
    (folder,) = _parse_folders(scratch_root)
    yield Ahead(trace, settings, folder)
    discard_parses_ahead()


def test_the_parse_started_ahead_is_the_one_taken_and_is_the_same_as_a_parse_of_its_own(
    ahead: Ahead, scratch_root: Path, tmp_path: Path
) -> None:
    with parsed_trace(ahead.trace, None, ahead.settings) as (parsed, _):
        assert parsed.event_count > 0 and not [i for i in parsed.issues if i.severity == "error"]
        assert all(path.is_relative_to(ahead.folder) for path in parsed.table_files.values())
        assert _parse_folders(scratch_root) == {ahead.folder}  # no second parse started
        assert table_differences(parsed, parse_file(SOURCE, tmp_path / "own", ahead.settings)) == {}
    assert not _parse_folders(scratch_root)
    with parsed_trace(ahead.trace, None, ahead.settings) as (again, _):  # taken once: the next asks parse anew
        assert not any(path.is_relative_to(ahead.folder) for path in again.table_files.values())


def test_other_settings_or_a_changed_file_parse_anew_and_the_unused_parse_is_discarded(
    ahead: Ahead, scratch_root: Path
) -> None:
    for other_trace, other_settings in ((ahead.trace, replace(ahead.settings, chunk_bytes=1 << 20)),
                                        (replace(ahead.trace, size_bytes=ahead.trace.size_bytes + 1), ahead.settings)):
        with parsed_trace(other_trace, None, other_settings) as (parsed, _):
            assert parsed.event_count > 0
            assert not any(path.is_relative_to(ahead.folder) for path in parsed.table_files.values())
    assert _parse_folders(scratch_root) == {ahead.folder}
    discard_parses_ahead()  # returns at once; the folder goes when its parse ends
    deadline = time.monotonic() + 120
    while _parse_folders(scratch_root) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _parse_folders(scratch_root)
