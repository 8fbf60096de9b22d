"""Whether the ingest that staged a version is still running: a lease it holds in the version's folder.

On a local disk the lease is a lock on ``LAKE/_staging/<run>/<version>/.lease`` (the operating system releases it
when the process dies, however it dies); in an object store it is that object, written again every
:data:`RENEW_S` seconds, and dead once it is :data:`STALE_S` seconds old. A version without a lease (staged by
Dagster's steps, which run in processes of their own) is judged by its age instead
(:mod:`pipelines.lake.maintenance`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import posixpath
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from pipelines.lake.lake import Lake
from pipelines.staging.area import remove_if_empty, staging_url

LEASE = ".lease"
RENEW_S = 10.0
STALE_S = 60.0
"""An object-store lease not written again for this long belongs to a dead ingest (six renewals missed)."""


@contextmanager
def hold_lease(lake: Lake, run_id: str, version: str) -> Iterator[None]:
    """Hold the lease of the run's staged ``version`` while the block runs (the ingest that stages and commits it)."""
    url = posixpath.join(staging_url(lake, run_id, version), LEASE)
    if lake.local:
        os.makedirs(posixpath.dirname(url), exist_ok=True)
        with open(url, "a") as lease:
            fcntl.flock(lease, fcntl.LOCK_EX)
            try:
                yield
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(url)
                remove_if_empty(lake, posixpath.dirname(url))
        return
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(RENEW_S):
            with contextlib.suppress(OSError):  # a missed renewal is one of six
                lake.fs.pipe_file(url, b"")

    lake.fs.pipe_file(url, b"")
    renewer = threading.Thread(target=renew, name="staging-lease", daemon=True)
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        renewer.join()
        with contextlib.suppress(FileNotFoundError):
            lake.fs.rm_file(url)


def lease_is_dead(lake: Lake, version_folder: str, modified: datetime | None) -> bool | None:
    """Whether the ingest holding the lease of ``version_folder`` (a path of ``lake.fs``) is gone; None where the
    version has no lease. ``modified``: the lease's last write, for object stores."""
    path = posixpath.join(version_folder, LEASE)
    if lake.local:
        try:
            with open(path) as lease:
                try:
                    fcntl.flock(lease, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    return False
                return True
        except FileNotFoundError:
            return None
    if modified is None:
        return None
    return modified < datetime.now(UTC) - timedelta(seconds=STALE_S)

