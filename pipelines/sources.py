"""Find the runs and trace files under a source folder or bucket prefix.

A file named like a trace that is not read as one (a hidden name, a hidden folder, a FIFO, socket or device, a link
to anything but a file) is named in a warning of its own, with why.
"""

from __future__ import annotations

import logging
import os
import posixpath
import stat
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import fsspec

from pipelines.identity import HIDDEN_PREFIXES, TraceFile, named_like_trace, run_id_for, trace_id_for
from pipelines.storage import filesystem, full_url

log = logging.getLogger(__name__)


class RunIdCollision(FileExistsError):
    """Two folders under a source would be the same run (``a/b`` and ``a.b``): neither is ingested.

    A ``FileExistsError`` so that the command line shows it as one line, as it does storage errors.
    """


class SourceUnavailable(RuntimeError):
    """A trace of a run could not be read for a reason other than its content (the store refused, reset, timed
    out, throttled or failed): the run's ingest fails and its previous version stays, rather than a version
    without the trace."""


@dataclass(frozen=True)
class RunSource:
    """One run: a folder that directly holds trace files."""

    run_id: str
    url: str
    traces: tuple[TraceFile, ...]


def _unique_trace_ids(names: list[str]) -> list[str]:
    """Trace ids per file, suffixed where two names differ only by extension (``a.json``, ``a.json.gz``)."""
    seen: dict[str, int] = defaultdict(int)
    ids = []
    for name in names:
        base = trace_id_for(name)
        seen[base] += 1
        ids.append(base if seen[base] == 1 else f"{base}~{seen[base]}")
    return ids


def discover_runs(
    source_url: str, options: dict[str, Any] | None = None, *, report_skipped: bool = True
) -> list[RunSource]:
    """Every run under ``source_url`` (a folder, bucket prefix, or a single trace file); each file named like a
    trace that is skipped is logged, unless ``report_skipped`` is False (a second look, after one that did).

    Raises:
        FileNotFoundError: when ``source_url`` does not exist.
    """
    fs, root = filesystem(source_url, options)
    fs.invalidate_cache(root)  # s3fs keeps listings per process; new traces must be found on every call
    if not fs.exists(root):
        raise FileNotFoundError(f"source {source_url} does not exist")
    if fs.isdir(root):
        files = fs.find(root, detail=True)
    else:  # a file, or a FIFO, socket or device: named if skipped
        files = {root: fs.info(root)}
        root = posixpath.dirname(root)
    return group_runs(fs, root, files, report_skipped=report_skipped)


def _modified(info: dict[str, Any]) -> float | None:
    """POSIX seconds of fsspec's ``mtime`` (local: a float) or ``LastModified`` (S3: a datetime)."""
    value = info.get("mtime") or info.get("LastModified")
    if isinstance(value, datetime):
        return value.timestamp()
    return float(value) if isinstance(value, int | float) else None


def _follow_link(fs: fsspec.AbstractFileSystem, path: str, info: dict[str, Any]) -> dict[str, Any]:
    """The info of the file a symbolic link points to (a local listing reports the link itself);
    a link to anything but a file keeps the link's own info."""
    if not info.get("islink"):
        return info
    target = os.path.realpath(path)
    return {**fs.info(target), "name": path} if os.path.isfile(target) else info


_SPECIAL_FILES = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"))


def _not_a_file(path: str, info: dict[str, Any]) -> str:
    """What ``path`` (not a regular file) is, for the line that says it was skipped."""
    if info.get("islink"):
        return f"a symbolic link to {info.get('destination') or os.path.realpath(path)}, which is not a file"
    try:
        mode = os.stat(path).st_mode
    except OSError:  # on an object store, or gone since the listing
        return f"not a regular file ({info.get('type')})"
    kind = next((kind for is_kind, kind in _SPECIAL_FILES if is_kind(mode)), "something else")
    return f"{kind}, not a regular file"


def _skipped_because(rel: str, path: str, info: dict[str, Any]) -> str | None:
    """Why a file named like a trace is not read as one (``rel``: its path under the source), or None."""
    *folders, name = rel.split("/")
    if name.startswith(HIDDEN_PREFIXES):
        return f"its name starts with {name[0]!r}, which marks files that are not read"
    hidden = next((folder for folder in folders if folder.startswith(HIDDEN_PREFIXES)), None)
    if hidden is not None:
        return f"it is in the folder {hidden!r}, whose name starts with {hidden[0]!r}: such folders are not read"
    if info.get("type", "file") != "file":
        return _not_a_file(path, info)
    return None


def group_runs(
    fs: fsspec.AbstractFileSystem, root: str, files: dict[str, dict[str, Any]], *, report_skipped: bool = True
) -> list[RunSource]:
    """Group listed files (path → fsspec info with ``size`` and ``ETag``/``mtime``) under ``root`` into runs;
    each file named like a trace that is not read is logged, with why (unless ``report_skipped`` is False).

    Raises:
        RunIdCollision: when two folders would get the same ``run_id``.
    """
    by_dir: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for path, info in files.items():
        rel = posixpath.relpath(path, root)
        if not named_like_trace(posixpath.basename(path)):
            continue
        info = _follow_link(fs, path, info)
        skipped = _skipped_because(rel, path, info)
        if skipped is None:
            by_dir[posixpath.dirname(rel) if "/" in rel else ""].append((path, info))
        elif report_skipped:
            log.warning("skipped %s: %s", path, skipped)
    source_name = posixpath.basename(root.rstrip("/")) or "run"
    runs = []
    folders: dict[str, str] = {}
    for rel_dir, entries in sorted(by_dir.items()):
        entries.sort(key=lambda e: e[0])
        run_id = run_id_for(rel_dir, source_name)
        if run_id in folders:
            raise RunIdCollision(
                f"folders {folders[run_id] or '.'!r} and {rel_dir!r} under {root} would both be run {run_id!r}:"
                " rename one"
            )
        folders[run_id] = rel_dir
        ids = _unique_trace_ids([posixpath.basename(p) for p, _ in entries])
        traces = tuple(
            TraceFile(
                url=full_url(fs, path),
                run_id=run_id,
                trace_id=trace_id,
                size_bytes=int(info.get("size") or 0),
                etag=str(info.get("ETag") or info.get("etag") or info.get("mtime") or "") or None,
                modified=_modified(info),
                run_trace_count=len(entries),
            )
            for (path, info), trace_id in zip(entries, ids, strict=True)
        )
        runs.append(RunSource(run_id, full_url(fs, posixpath.join(root, rel_dir) if rel_dir else root), traces))
    return runs
