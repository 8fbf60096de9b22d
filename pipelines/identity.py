"""Run, trace and rank identity, as CONTRACT.md defines them."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

TRACE_SUFFIXES = (".json.gz", ".json")
HIDDEN_PREFIXES = (".", "_")  # a file or folder named so is not read: editors' and tools' own, tracelake's staging
_RANK_IN_NAME = (
    re.compile(r"rank[-_]?(\d+)", re.IGNORECASE),
    re.compile(r"worker[-_]?(\d+)", re.IGNORECASE),
    re.compile(r"_(\d+)\."),
)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# Ids name lake folders and files (``run_id=<id>/<version>-<trace_id>.parquet``): short enough for
# any file system's 255-byte names, with room for the rest of the name.
_MAX_ID = 100


@dataclass(frozen=True)
class TraceFile:
    """One trace file found under a source: where it is and which run it belongs to."""

    url: str
    run_id: str
    trace_id: str
    size_bytes: int
    etag: str | None = None
    modified: float | None = None
    """When the file was last written (POSIX seconds), where the store says."""


@dataclass(frozen=True)
class RankClaim:
    """The rank a trace claims, and where that came from (``distributedInfo``, ``file_name``, ``default``)."""

    rank: int
    source: str


def named_like_trace(name: str) -> bool:
    """Whether a file name ends like a Kineto trace (``*.json`` or ``*.json.gz``); read as one unless hidden."""
    return name.lower().endswith(TRACE_SUFFIXES)


def safe_id(name: str) -> str:
    """``name`` itself where it is short and safe in paths, SQL and Hive partitions
    (``[A-Za-z0-9._-]``); otherwise its safe characters, cut short if need be, with ``-`` and a
    hash of ``name`` appended, so that names that differ get ids that differ (``coll a`` →
    ``coll_a-<hash>``, apart from a folder ``coll_a``)."""
    if name and len(name) <= _MAX_ID and not _UNSAFE.search(name) and name.strip("."):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{_UNSAFE.sub('_', name)[: _MAX_ID - 9]}-{digest}"


def trace_id_for(file_name: str) -> str:
    """The file name without ``.json``/``.json.gz``, made safe by :func:`safe_id`."""
    lower = file_name.lower()
    for suffix in TRACE_SUFFIXES:
        if lower.endswith(suffix):
            file_name = file_name[: -len(suffix)]
            break
    return safe_id(file_name)


def run_id_for(relative_dir: str, source_name: str) -> str:
    """``relative_dir`` with ``/`` as ``.``, or the source folder's name when the files sit at its top,
    made safe by :func:`safe_id`."""
    parts = [p for p in relative_dir.strip("/").split("/") if p]
    return safe_id(".".join(parts) if parts else source_name)


def rank_from_file_name(file_name: str) -> int | None:
    """Rank from names like ``rank-3``, ``rank3``, ``worker3`` or ``…_3.json``; None when absent."""
    for pattern in _RANK_IN_NAME:
        match = pattern.search(file_name)
        if match:
            return int(match.group(1))
    return None


def claim_rank(metadata: dict[str, Any], file_name: str) -> RankClaim:
    """A trace's rank: ``distributedInfo.rank``, else from the file name, else 0."""
    info = metadata.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return RankClaim(info["rank"], "distributedInfo")
    from_name = rank_from_file_name(file_name)
    if from_name is not None:
        return RankClaim(from_name, "file_name")
    return RankClaim(0, "default")
