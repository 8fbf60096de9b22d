"""Watch a source for runs whose file set changed, keeping the state in a compact cursor.

A run's **fingerprint** is the sum (mod 2^64) of one 64-bit hash per trace file over (URL, size,
ETag or mtime). A new file (a late rank) or a rewritten one (same key, new size or ETag) changes
it; an unchanged run keeps it, so ``run_id@fingerprint`` names one file set and serves as the
Dagster run key: Dagster launches each key once, and nothing is ingested twice.

Because the fingerprint is a sum, files can be added to it one at a time. That allows two
kinds of listing passes:

- **full** (every store, every ``full_pass_every``-th tick on S3): lists every object under the
  source (ListObjectsV2 pages of 1,000 keys: about 100 requests and a few seconds at 100,000
  objects) and recomputes every fingerprint. It is the only pass that sees rewritten files and
  late files whose keys sort before the newest key seen.
- **incremental** (S3 between full passes): ListObjectsV2 with ``StartAfter`` the greatest key
  seen, so only keys that sort after it are listed (usually one page). Sources whose run
  folders sort by time (dates, job ids) are append-mostly and get new runs and most late
  ranks within one tick; rewrites and out-of-order keys wait for the next full pass.

The cursor holds the greatest key seen, the tick count and one 16-hex-digit fingerprint per run
(about 40 bytes a run: 400 kB at 10,000 runs). It never holds file lists.

On a local (or mounted) folder the profiler writes each file in place, so a pass could see one
half written. A run with a file modified within ``settle_s`` seconds is left **settling**: not
reported, and its last fingerprint kept, so a later pass reports it once its files are still.
Object stores show an object only once its upload is complete, so there every run is settled.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field, replace
from typing import Any

import fsspec
import orjson

from pipelines.identity import TraceFile
from pipelines.sources import RunSource, discover_runs, group_runs
from pipelines.storage import filesystem, is_local

_MASK = (1 << 64) - 1


def file_hash(trace: TraceFile) -> int:
    """A 64-bit hash of one file's identity and version."""
    key = f"{trace.url}\0{trace.size_bytes}\0{trace.etag or ''}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


def fingerprint(traces: tuple[TraceFile, ...], start: str = "0" * 16) -> str:
    """The run fingerprint of ``traces`` added onto ``start`` (another fingerprint), as 16 hex digits."""
    total = int(start, 16)
    for trace in traces:
        total = (total + file_hash(trace)) & _MASK
    return f"{total:016x}"


@dataclass(frozen=True)
class WatchState:
    """What a watcher remembers between ticks (serialized as the sensor cursor)."""

    runs: dict[str, str] = field(default_factory=dict)
    after: str = ""
    ticks: int = 0

    def to_cursor(self) -> str:
        """Compact JSON for Dagster's cursor."""
        return orjson.dumps({"after": self.after, "ticks": self.ticks, "runs": self.runs}).decode()

    @classmethod
    def from_cursor(cls, cursor: str | None) -> WatchState:
        """The state a cursor holds (empty for a first tick)."""
        if not cursor:
            return cls()
        data = orjson.loads(cursor)
        return cls(runs=dict(data["runs"]), after=data["after"], ticks=int(data["ticks"]))


@dataclass(frozen=True)
class RunChange:
    """A run whose file set is new or changed since the last pass."""

    run_id: str
    url: str
    fingerprint: str
    is_new: bool

    @property
    def run_key(self) -> str:
        """The Dagster run key: one launch per file set."""
        return f"{self.run_id}@{self.fingerprint}"


def _supports_start_after(fs: fsspec.AbstractFileSystem) -> bool:
    return hasattr(fs, "call_s3")


def _list_after(fs: fsspec.AbstractFileSystem, root: str, after: str) -> dict[str, dict[str, Any]]:
    """Objects under ``root`` whose keys sort after ``after`` (S3 ListObjectsV2 with StartAfter)."""
    bucket, _, prefix = root.partition("/")
    prefix = f"{prefix.rstrip('/')}/" if prefix else ""
    files: dict[str, dict[str, Any]] = {}
    kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "StartAfter": after.partition("/")[2]}
    while True:
        page = fs.call_s3("list_objects_v2", **kwargs)
        for obj in page.get("Contents", []):
            files[f"{bucket}/{obj['Key']}"] = {"type": "file", "size": obj["Size"], "ETag": obj.get("ETag")}
        if not page.get("IsTruncated"):
            return files
        kwargs["ContinuationToken"] = page["NextContinuationToken"]


def _greatest_key(runs: list[RunSource], floor: str) -> str:
    return max([floor, *(t.url.partition("://")[2] or t.url for r in runs for t in r.traces)])


def scan(
    source_url: str,
    options: dict[str, Any] | None,
    state: WatchState,
    *,
    full_pass_every: int = 10,
    settle_s: float = 0,
) -> tuple[list[RunChange], WatchState, list[str]]:
    """List the source; return the runs whose file sets changed, the next state, and the runs still settling.

    A full pass runs on the first tick, every ``full_pass_every`` ticks, and always on stores
    without ``StartAfter`` (local folders, where listing is cheap); otherwise only new keys are listed.
    """
    fs, root = filesystem(source_url, options)
    full = not state.after or state.ticks % full_pass_every == 0 or not _supports_start_after(fs)
    if full:
        try:
            runs = discover_runs(source_url, options)
        except FileNotFoundError:  # nothing landed under the prefix yet
            runs = []
        seen = {r.run_id: fingerprint(r.traces) for r in runs}
    else:
        runs = group_runs(fs, root, _list_after(fs, root, state.after))
        seen = {r.run_id: fingerprint(r.traces, state.runs.get(r.run_id, "0" * 16)) for r in runs}
    settling = _settling(runs, settle_s) if settle_s > 0 and is_local(fs) else []
    urls = {r.run_id: r.url for r in runs}
    changes = [
        RunChange(run_id, urls[run_id], fp, run_id not in state.runs)
        for run_id, fp in sorted(seen.items())
        if state.runs.get(run_id) != fp and run_id not in settling
    ]
    known = seen if full else {**state.runs, **seen}
    for run_id in settling:  # compared again, against what was last reported, once still
        if run_id in state.runs:
            known[run_id] = state.runs[run_id]
        else:
            del known[run_id]
    after = _greatest_key(runs, "" if full else state.after)
    return changes, replace(state, runs=known, after=after, ticks=state.ticks + 1), settling


def _settling(runs: list[RunSource], settle_s: float) -> list[str]:
    """The runs with a file modified less than ``settle_s`` seconds ago."""
    cutoff = time.time() - settle_s
    return [r.run_id for r in runs if any(t.modified is not None and t.modified > cutoff for t in r.traces)]

