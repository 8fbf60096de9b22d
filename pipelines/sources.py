"""Find the runs and trace files under a source folder or bucket prefix."""

from __future__ import annotations

import logging
import os
import posixpath
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import fsspec

from pipelines.identity import TraceFile, is_trace_file, run_id_for, trace_id_for
from pipelines.storage import filesystem, full_url

log = logging.getLogger(__name__)


class RunIdCollision(FileExistsError):
    """Two folders under a source would be the same run (``a/b`` and ``a.b``): neither is ingested.

    A ``FileExistsError`` so that the command line shows it as one line, as it does storage errors.
    """


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


def discover_runs(source_url: str, options: dict[str, Any] | None = None) -> list[RunSource]:
    """Every run under ``source_url`` (a folder, bucket prefix, or a single trace file).

    Raises:
        FileNotFoundError: when ``source_url`` does not exist.
    """
    fs, root = filesystem(source_url, options)
    fs.invalidate_cache(root)  # s3fs keeps listings per process; new traces must be found on every call
    if not fs.exists(root):
        raise FileNotFoundError(f"source {source_url} does not exist")
    if fs.isfile(root):
        files = {root: fs.info(root)}
        root = posixpath.dirname(root)
    else:
        files = fs.find(root, detail=True)
    return group_runs(fs, root, files)


def _modified(info: dict[str, Any]) -> float | None:
    """POSIX seconds of fsspec's ``mtime`` (local: a float) or ``LastModified`` (S3: a datetime)."""
    value = info.get("mtime") or info.get("LastModified")
    if isinstance(value, datetime):
        return value.timestamp()
    return float(value) if isinstance(value, int | float) else None


def _follow_link(fs: fsspec.AbstractFileSystem, path: str, info: dict[str, Any]) -> dict[str, Any]:
    """The info of the file a symbolic link points to (a local listing reports the link itself);
    a link to no file is reported and skipped."""
    if not info.get("islink"):
        return info
    target = os.path.realpath(path)
    if os.path.isfile(target):
        return {**fs.info(target), "name": path}
    log.warning("skipped %s: a symbolic link to %s, which is not a file", path, info.get("destination", target))
    return info


def group_runs(fs: fsspec.AbstractFileSystem, root: str, files: dict[str, dict[str, Any]]) -> list[RunSource]:
    """Group listed files (path → fsspec info with ``size`` and ``ETag``/``mtime``) under ``root`` into runs.

    Raises:
        RunIdCollision: when two folders would get the same ``run_id``.
    """
    by_dir: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for path, info in files.items():
        rel = posixpath.relpath(path, root)
        if not is_trace_file(posixpath.basename(path)):
            continue
        info = _follow_link(fs, path, info)
        if info.get("type", "file") == "file":
            if any(part.startswith((".", "_")) for part in rel.split("/")[:-1]):
                continue
            by_dir[posixpath.dirname(rel) if "/" in rel else ""].append((path, info))
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
