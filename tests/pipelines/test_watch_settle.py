"""The watcher on a local folder, where the profiler writes trace files in place: a run whose files are still
changing waits for a later pass, and then is reported once."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from pipelines.watch import WatchState, scan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "traces"
TRACE = EXAMPLES / "rocm_mi250" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def _put(source: Path, key: str, age_s: float) -> Path:
    """Copy a trace to ``source/key``, last written ``age_s`` seconds ago."""
    path = source / key
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(TRACE, path)
    _age(path, age_s)
    return path


def _age(path: Path, age_s: float) -> None:
    written = time.time() - age_s
    os.utime(path, (written, written))


def test_a_run_being_written_is_reported_once_its_files_are_still(tmp_path: Path) -> None:
    source = str(tmp_path)
    _put(tmp_path, "a/rank-0.json.gz", age_s=1)
    _put(tmp_path, "b/rank-0.json.gz", age_s=300)

    changes, state, settling = scan(source, None, WatchState(), settle_s=60)
    assert [c.run_id for c in changes] == ["b"] and settling == ["a"]
    assert set(state.runs) == {"b"}

    _age(tmp_path / "a" / "rank-0.json.gz", 300)
    changes, state, settling = scan(source, None, state, settle_s=60)
    assert [(c.run_id, c.is_new) for c in changes] == [("a", True)] and settling == []
    reported = state.runs["a"]

    # A late rank being written: the run keeps the file set reported last until the new file is still.
    late = _put(tmp_path, "a/rank-1.json.gz", age_s=1)
    changes, state, settling = scan(source, None, state, settle_s=60)
    assert changes == [] and settling == ["a"] and state.runs["a"] == reported

    _age(late, 300)
    changes, state, settling = scan(source, None, state, settle_s=60)
    assert [(c.run_id, c.is_new) for c in changes] == [("a", False)] and settling == []
    _, fresh, _ = scan(source, None, WatchState())
    assert state.runs == fresh.runs
    assert scan(source, None, state, settle_s=60)[0] == []


def test_without_a_settle_time_new_files_are_reported_at_once(tmp_path: Path) -> None:
    _put(tmp_path, "a/rank-0.json.gz", age_s=0)
    changes, _, settling = scan(str(tmp_path), None, WatchState())
    assert [c.run_id for c in changes] == ["a"] and settling == []
