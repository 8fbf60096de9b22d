"""Run, trace and rank identity, as CONTRACT.md defines them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

TRACE_SUFFIXES = (".json.gz", ".json")
_RANK_IN_NAME = (
    re.compile(r"rank[-_]?(\d+)", re.IGNORECASE),
    re.compile(r"worker[-_]?(\d+)", re.IGNORECASE),
    re.compile(r"_(\d+)\."),
)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


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


def is_trace_file(name: str) -> bool:
    """Whether a file name looks like a Kineto trace (``*.json`` or ``*.json.gz``)."""
    lower = name.lower()
    return lower.endswith(TRACE_SUFFIXES) and not name.startswith((".", "_"))


def trace_id_for(file_name: str) -> str:
    """The file name without ``.json``/``.json.gz``, made safe for file names and SQL."""
    lower = file_name.lower()
    for suffix in TRACE_SUFFIXES:
        if lower.endswith(suffix):
            file_name = file_name[: -len(suffix)]
            break
    return _UNSAFE.sub("_", file_name) or "trace"


def run_id_for(relative_dir: str, source_name: str) -> str:
    """``relative_dir`` with ``/`` as ``.``, or the source folder's name when the files sit at its top."""
    parts = [p for p in relative_dir.strip("/").split("/") if p]
    return _UNSAFE.sub("_", ".".join(parts) if parts else source_name) or "run"


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
