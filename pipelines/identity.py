"""Run, trace and rank identity, as CONTRACT.md defines them."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

TRACE_SUFFIXES = (".json.gz", ".json")
HIDDEN_PREFIXES = (".", "_")  # a file or folder named so is not read: editors' and tools' own, tracelake's staging
# A number after a rank marker is the writer's own statement of the rank; a bare ``_N.`` may as well be a job id
# or a timestamp (``Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz``), so it is a rank only where it is plausible.
_RANK_MARKERS = (
    re.compile(r"rank[-_]?(\d+)", re.IGNORECASE),
    re.compile(r"worker[-_]?(\d+)", re.IGNORECASE),
)
_BARE_NUMBER = re.compile(r"_(\d+)\.")
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
    run_trace_count: int = 1
    """How many trace files its run holds: where a trace names no world size, the bound below which a bare number in
    its file name can be a rank (each rank of a job writes at least one file)."""


@dataclass(frozen=True)
class RankClaim:
    """The rank a trace claims, and where that came from (``distributedInfo``, ``file_name``, ``default``)."""

    rank: int
    source: str
    declined: str | None = None
    """Why a number in the file name was not taken as the rank, where there was one."""

    def note(self) -> str | None:
        """The data-quality note of a rank not written in the trace; None when it is."""
        if self.source == "distributedInfo":
            return None
        if self.declined:
            return f"no distributedInfo.rank; {self.declined}: rank {self.rank} assumed"
        return f"no distributedInfo.rank; rank {self.rank} taken from the {self.source.replace('_', ' ')}"


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


def rank_from_file_name(file_name: str) -> tuple[int, bool] | None:
    """The number in names like ``rank-3``, ``rank3``, ``worker3`` (marked: True) or ``…_3.json`` (False); None
    when the name holds neither."""
    for pattern in _RANK_MARKERS:
        match = pattern.search(file_name)
        if match:
            return int(match.group(1)), True
    match = _BARE_NUMBER.search(file_name)
    return (int(match.group(1)), False) if match else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def claim_rank(metadata: dict[str, Any], trace: TraceFile) -> RankClaim:
    """A trace's rank: ``distributedInfo.rank``; else the number after a rank marker in its file name; else a bare
    number in its file name that is below the world size (``distributedInfo.world_size``, or where the trace has
    none, the number of trace files in its run); else 0."""
    found = metadata.get("distributedInfo")
    info: dict[str, Any] = found if isinstance(found, dict) else {}
    if _int(info.get("rank")) is not None:
        return RankClaim(info["rank"], "distributedInfo")
    from_name = rank_from_file_name(trace.url.rsplit("/", 1)[-1])
    if from_name is None:
        return RankClaim(0, "default")
    number, marked = from_name
    world_size = _int(info.get("world_size"))
    bound = world_size if world_size else trace.run_trace_count
    if marked or number < bound:
        return RankClaim(number, "file_name")
    of = f"the world size {world_size}" if world_size else f"the run's {trace.run_trace_count} trace file(s)"
    declined = f"the number {number} in the file name is no rank marker's (rank-N, workerN) and not below {of}"
    return RankClaim(0, "default", declined)
