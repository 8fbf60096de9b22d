"""Where a run's uncommitted version lives in the lake's storage, and how files get there and go."""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import secrets
import shutil
import time
from pathlib import Path

from pipelines.lake.lake import Lake

STAGING = "_staging"


def new_version() -> str:
    """A unique, time-sortable name for one ingest of one run (its staging folder)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(4)


def short_name(name: str) -> str:
    """``name`` as one short path segment (names may be long, or hold characters a path cannot)."""
    return hashlib.blake2b(name.encode(), digest_size=8).hexdigest()


def staging_url(lake: Lake, run_id: str, version: str) -> str:
    """Where the files of one uncommitted version of a run wait for its commit: ``LAKE/_staging/<run>/<version>``.

    In the lake's own storage, so that parse steps on other machines can hand their files to the commit.
    """
    return lake.url_of(posixpath.join(STAGING, short_name(run_id), version))


def put_file(lake: Lake, local: Path, url: str) -> None:
    """Move a local file to ``url`` in the lake's storage."""
    if lake.local:
        Path(url).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(local, url)
    else:
        lake.fs.put_file(str(local), url)


def remove_if_empty(lake: Lake, folder: str) -> None:
    """Remove ``folder`` on a local disk if nothing is left in it (object stores have no folders to leave behind)."""
    if lake.local:
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def discard_staging(lake: Lake, run_id: str, version: str) -> None:
    """Delete a version's staged files (after its commit, or when it is abandoned)."""
    url = staging_url(lake, run_id, version)
    if lake.fs.exists(url):
        lake.fs.rm(url, recursive=True)
    remove_if_empty(lake, posixpath.dirname(url))  # another version of the run may still be staged there


COMMITTED = "commit"
"""A version's files placed for its commit (:func:`pipelines.lake.commit.place_for_commit`)."""
SETTLED = ".settled"
"""Marks a committed version whose placed files stay for readers that listed them before they moved."""


def settle_staging(lake: Lake, run_id: str, version: str) -> None:
    """After a commit: delete the version's staged files but those placed for the commit, which a query that
    started before they moved into the tables' folders may still open (a scan opens its files as it goes); they go
    once the retention has passed (:func:`pipelines.lake.maintenance.sweep_staging`)."""
    url = staging_url(lake, run_id, version)
    if not lake.fs.exists(posixpath.join(url, COMMITTED)):
        discard_staging(lake, run_id, version)
        return
    for entry in lake.fs.ls(url, detail=False, refresh=True):
        if posixpath.basename(entry.rstrip("/")) != COMMITTED:
            lake.fs.rm(entry, recursive=True)
    lake.fs.pipe_file(posixpath.join(url, SETTLED), b"")
