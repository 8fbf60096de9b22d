"""What crosses from one step of a run's ingest to the next, possibly on another machine: JSON in the staging area.

Each parse step leaves its trace's summary beside the trace's files (``traces/<trace>.json``); the step that
stages the run's own tables leaves the run's (``run.json``), which the step that builds and commits the analysis
tables reads. A manifest that is missing (swept, or removed by an object-store lifecycle rule) is an error that says
so: a commit never proceeds on less than what was staged.
"""

from __future__ import annotations

import posixpath
from dataclasses import asdict, dataclass, fields
from typing import Any

import orjson

from pipelines.identity import RankClaim, TraceFile
from pipelines.lake.lake import Lake
from pipelines.parse import ParsedTrace
from pipelines.quality import QualityIssue
from pipelines.sources import RunSource
from pipelines.staging.area import short_name, staging_url

FORMAT = 1


class ManifestMissing(FileNotFoundError):
    """A step's hand-over is not in the staging area: the run cannot be committed as staged."""


@dataclass(frozen=True)
class StagedTrace:
    """One trace parsed and uploaded under its run's new version: the small summary a commit needs."""

    parsed: ParsedTrace
    """Identity, rank claim, window, event count and issues (``table_files`` empty: the local files are gone)."""
    files: dict[str, str]
    """Table → URL of its staged file."""
    row_counts: dict[str, int]
    seconds: float


@dataclass(frozen=True)
class StagedRun:
    """Every raw table of one run's new version staged: what its commit makes visible."""

    run: RunSource
    version: str
    traces: list[ParsedTrace]
    issues: list[QualityIssue]
    files: dict[str, list[str]]
    """Raw table → URLs of its staged files."""
    row_counts: dict[str, int]

    @property
    def errors(self) -> list[QualityIssue]:
        """Issues of severity ``error``."""
        return [i for i in self.issues if i.severity == "error"]


def _parsed_json(parsed: ParsedTrace) -> dict[str, Any]:
    return {f.name: asdict(parsed)[f.name] for f in fields(parsed) if f.name != "table_files"}


def _parsed(data: dict[str, Any]) -> ParsedTrace:
    return ParsedTrace(**{
        **data,
        "trace": TraceFile(**data["trace"]),
        "rank": RankClaim(**data["rank"]),
        "issues": [QualityIssue(**issue) for issue in data["issues"]],
    })


def _run_source(data: dict[str, Any]) -> RunSource:
    return RunSource(data["run_id"], data["url"], tuple(TraceFile(**trace) for trace in data["traces"]))


def trace_manifest_url(lake: Lake, run_id: str, version: str, trace_id: str) -> str:
    """Where the summary of a staged trace lies."""
    return posixpath.join(staging_url(lake, run_id, version), "traces", f"{short_name(trace_id)}.json")


def run_manifest_url(lake: Lake, run_id: str, version: str) -> str:
    """Where the summary of a staged run lies."""
    return posixpath.join(staging_url(lake, run_id, version), "run.json")


def _write(lake: Lake, url: str, document: dict[str, Any]) -> None:
    lake.fs.makedirs(posixpath.dirname(url), exist_ok=True)
    lake.fs.pipe_file(url, orjson.dumps({"format": FORMAT, **document}))


def _read(lake: Lake, url: str, what: str) -> dict[str, Any]:
    try:
        document = orjson.loads(lake.fs.cat_file(url))
    except FileNotFoundError as exc:
        raise ManifestMissing(
            f"{what}: its manifest {url} is missing from the staging area (swept by `tracelake maintain`, or removed "
            "by a storage lifecycle rule?): nothing was committed; ingest the run again"
        ) from exc
    if document.get("format") != FORMAT:
        raise ManifestMissing(f"{what}: {url} is a manifest of format {document.get('format')}, not {FORMAT}")
    manifest: dict[str, Any] = document
    return manifest


def write_trace_manifest(lake: Lake, version: str, staged: StagedTrace) -> None:
    """Leave ``staged`` beside its files for the step that stages the run."""
    trace = staged.parsed.trace
    _write(lake, trace_manifest_url(lake, trace.run_id, version, trace.trace_id), {
        "parsed": _parsed_json(staged.parsed), "files": staged.files, "row_counts": staged.row_counts,
        "seconds": staged.seconds,
    })


def read_trace_manifest(lake: Lake, version: str, trace: TraceFile) -> StagedTrace | None:
    """The summary a parse step left for ``trace`` under ``version``; None when no parse step finished it."""
    url = trace_manifest_url(lake, trace.run_id, version, trace.trace_id)
    if not lake.fs.exists(url):
        return None
    document = _read(lake, url, f"trace {trace.url}")
    return StagedTrace(_parsed(document["parsed"]), document["files"], document["row_counts"], document["seconds"])


def write_run_manifest(lake: Lake, staged: StagedRun) -> None:
    """Leave ``staged`` in its staging folder for the step that commits it."""
    run = staged.run
    _write(lake, run_manifest_url(lake, run.run_id, staged.version), {
        "run": {"run_id": run.run_id, "url": run.url, "traces": [asdict(t) for t in run.traces]},
        "version": staged.version,
        "traces": [_parsed_json(parsed) for parsed in staged.traces],
        "issues": [asdict(issue) for issue in staged.issues],
        "files": staged.files,
        "row_counts": staged.row_counts,
    })


def read_run_manifest(lake: Lake, run_id: str, version: str) -> StagedRun:
    """The run staged under ``version``; raises :class:`ManifestMissing` when its manifest is not there."""
    document = _read(lake, run_manifest_url(lake, run_id, version), f"run {run_id!r} (version {version})")
    return StagedRun(
        _run_source(document["run"]),
        document["version"],
        [_parsed(parsed) for parsed in document["traces"]],
        [QualityIssue(**issue) for issue in document["issues"]],
        document["files"],
        document["row_counts"],
    )


def has_run_manifest(lake: Lake, run_id: str, version: str) -> bool:
    """Whether a run was staged under ``version`` (its raw tables wait for a commit)."""
    return bool(lake.fs.exists(run_manifest_url(lake, run_id, version)))
