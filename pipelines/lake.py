"""The lake's layout and its commit protocol: a run's partition is replaced whole or not at all.

Files go to ``LAKE/<layer>/<table>/run_id=<run_id>/<version>-s<schema>-<name>.parquet``, where
``<schema>`` hashes the file's column names and types: readers bind each group of files that
share one from a single footer, instead of every file's (see :func:`schema_groups`). A write uploads
every new file first and then commits by writing one manifest,
``LAKE/_manifests/<layer>/<run_id>.json``, in a single PUT (object stores) or rename (local).
Readers that go through the manifests (``tracelake sql``, ``open_lake``) only ever see committed
files. Files of older versions and of interrupted writes are deleted after the next commit of that
run, so plain Parquet globs over the lake also see exactly one version once a write finishes.
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from pipelines.rows import small_statements
from pipelines.storage import filesystem, full_url, is_local

log = logging.getLogger(__name__)

LAYERS = ("raw", "marts")
_SCHEMA_TAG = re.compile(r"(?:^|/)v[^-/]+-s([0-9a-f]{12})-[^/]*$")  # <version>-s<schema>-<name>.parquet


@dataclass(frozen=True)
class Manifest:
    """The committed files of one run in one layer, by table (paths relative to the lake root)."""

    run_id: str
    layer: str
    version: str
    committed_at: str
    tables: dict[str, list[str]]


def schema_tag(local: Path) -> str:
    """A short hash of a Parquet file's column names and types, as DuckDB reads them (not their nullability)."""
    with small_statements() as con:
        columns = con.execute("describe select * from read_parquet($path)", {"path": str(local)}).fetchall()
    return hashlib.blake2b(repr([column[:2] for column in columns]).encode(), digest_size=6).hexdigest()


def schema_groups(urls: list[str]) -> list[tuple[list[str], bool]]:
    """``urls`` grouped by the schema tag in their names: (files, whether they share one schema) per group.

    Files named without a tag (written before tags, or by hand) come last, as one group of
    schemas unknown.
    """
    groups: dict[str | None, list[str]] = {}
    for url in urls:
        match = _SCHEMA_TAG.search(url)
        groups.setdefault(match.group(1) if match else None, []).append(url)
    return [(files, tag is not None) for tag, files in sorted(groups.items(), key=lambda group: group[0] is None)]


def new_version() -> str:
    """A sortable, unique version tag for one write of one run."""
    return time.strftime("v%Y%m%dT%H%M%S", time.gmtime()) + secrets.token_hex(3)


class Lake:
    """A lake at a local path or fsspec URL."""

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        self.url = url
        self.options = options
        self.fs, self.root = filesystem(url, options)

    def _path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def url_of(self, relative: str) -> str:
        """Full URL (or local path) of a path relative to the lake root."""
        return full_url(self.fs, self._path(relative))

    def _manifest_path(self, layer: str, run_id: str) -> str:
        return self._path("_manifests", layer, f"{run_id}.json")

    def write_run(
        self, layer: str, run_id: str, files: dict[str, list[tuple[str, Path]]], *, keep_other_tables: bool = False
    ) -> Manifest:
        """Upload ``files`` (table → [(name, local parquet)]) as the new version of ``run_id``, then commit.

        The previous version stays visible until the manifest is replaced. With
        ``keep_other_tables`` the run's committed tables that ``files`` does not name are kept.
        """
        version = new_version()
        tables = {
            table: [self.upload(layer, run_id, version, table, name, local) for name, local in entries]
            for table, entries in files.items()
        }
        return self.commit(layer, run_id, version, tables, keep_other_tables=keep_other_tables)

    def upload(self, layer: str, run_id: str, version: str, table: str, name: str, local: Path) -> str:
        """Upload one file of an uncommitted ``version``; returns its path relative to the lake root.

        Invisible to readers until :meth:`commit` names it; a version never committed is removed
        by the run's next commit, so any process (a parse step on another machine) may upload.
        """
        relative = posixpath.join(layer, table, f"run_id={run_id}", f"{version}-s{schema_tag(local)}-{name}.parquet")
        self.fs.makedirs(posixpath.dirname(self._path(relative)), exist_ok=True)
        self.fs.put_file(str(local), self._path(relative))
        return relative

    def commit(
        self, layer: str, run_id: str, version: str, tables: dict[str, list[str]], *, keep_other_tables: bool = False
    ) -> Manifest:
        """Make ``tables`` (table → uploaded relative paths) the run's contents in one write, then collect garbage."""
        previous = self.manifest(layer, run_id) if keep_other_tables else None
        merged = {**(previous.tables if previous else {}), **tables}
        manifest = Manifest(run_id, layer, version, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), merged)
        self._write_manifest(manifest)
        self._collect_garbage(manifest)
        return manifest

    def _write_manifest(self, manifest: Manifest) -> None:
        target = self._manifest_path(manifest.layer, manifest.run_id)
        body = orjson.dumps(manifest.__dict__, option=orjson.OPT_INDENT_2)
        self.fs.makedirs(posixpath.dirname(target), exist_ok=True)
        if is_local(self.fs):
            staging = f"{target}.{manifest.version}.tmp"
            self.fs.pipe_file(staging, body)
            Path(staging).replace(target)  # atomic on one filesystem
        else:
            self.fs.pipe_file(target, body)  # a PUT is atomic on object stores

    def _collect_garbage(self, manifest: Manifest) -> None:
        """Delete this run's files that the manifest does not name (older versions, interrupted writes).

        Listings are always fresh: object-store filesystems (s3fs) cache directory listings per
        process, and files another process wrote since must be seen to be collected.
        """
        keep = {self._path(p) for paths in manifest.tables.values() for p in paths}
        layer_dir = self._path(manifest.layer)
        for table_dir in self.fs.ls(layer_dir, detail=False, refresh=True):
            run_dir = posixpath.join(table_dir, f"run_id={manifest.run_id}")
            for path in self.fs.find(run_dir):  # empty when the run has no folder in this table
                if path not in keep:
                    log.debug("removing stale %s", path)
                    self.fs.rm_file(path)

    def manifest(self, layer: str, run_id: str) -> Manifest | None:
        """The committed manifest of a run, or None if the run was never committed."""
        try:  # read, not exists() first: s3fs answers exists() from a possibly stale listing cache
            body = self.fs.cat_file(self._manifest_path(layer, run_id))
        except FileNotFoundError:
            return None
        return Manifest(**orjson.loads(body))

    def manifests(self, layer: str) -> list[Manifest]:
        """Every committed run of a layer (listed afresh: other processes may have committed since)."""
        folder = self._path("_manifests", layer)
        try:
            listing = self.fs.ls(folder, detail=False, refresh=True)
        except FileNotFoundError:
            return []
        paths = [p for p in listing if p.endswith(".json")]
        bodies = self.fs.cat(paths) if paths else {}
        return [Manifest(**orjson.loads(bodies[p])) for p in sorted(bodies)]

    def committed_files(self, layer: str, run_ids: set[str] | None = None) -> dict[str, list[str]]:
        """Table → URLs of its committed files in ``layer`` (all runs, or only ``run_ids``).

        On object stores the listing cache is readied for reading them too (:meth:`_cache_listings`).
        """
        paths: dict[str, list[str]] = {}
        for manifest in self.manifests(layer):
            if run_ids is not None and manifest.run_id not in run_ids:
                continue
            for table, relative in manifest.tables.items():
                paths.setdefault(table, []).extend(self._path(p) for p in relative)
        if not is_local(self.fs):
            for table, table_paths in paths.items():
                self._cache_listings(self._path(layer, table), table_paths)
        return {table: [full_url(self.fs, p) for p in table_paths] for table, table_paths in paths.items()}

    def _cache_listings(self, table_dir: str, paths: list[str]) -> None:
        """See that the filesystem's listing cache holds every one of ``paths``, the files of one table.

        DuckDB asks about every file it reads (a glob as a view binds, several ``info`` calls as a
        query opens it), which s3fs answers from its listing cache, or else with a HEAD request
        each. Folders whose cached listing lacks one of ``paths`` (never listed, or listed before
        another process committed it) are listed afresh: one run's folder, or else the whole table
        in one listing. What was cached there goes first, since a listing adds only folders the
        cache lacks.
        """
        folders = {posixpath.dirname(path) for path in paths}
        cached = {entry["name"] for folder in folders for entry in self.fs.dircache.get(folder, [])}
        stale = {posixpath.dirname(path) for path in paths if path not in cached}
        if not stale:
            return
        folder = stale.pop() if len(stale) == 1 else table_dir
        for key in [key for key in self.fs.dircache if key == folder or key.startswith(f"{folder}/")]:
            self.fs.dircache.pop(key, None)
        self.fs.find(folder)
