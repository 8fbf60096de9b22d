"""The Dagster instance home that ``tracelake ingest`` records a lake's runs into and ``tracelake ui`` shows (no
Dagster import: ``tracelake ingest`` records without one)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path

from pipelines.lake.lake import Lake

DEFAULT_ROOT = Path("~/.tracelake/dagster").expanduser()
"""Where each lake's default home is, ``<lake key>/`` (:func:`lake_key`), when ``DAGSTER_HOME`` is not set."""
QUIET = "telemetry:\n  enabled: false\n"  # a default home's whole dagster.yaml
# What tracelake 0.2 wrote after QUIET (or alone, in a DAGSTER_HOME): a custom event log storage, since removed.
# A home whose dagster.yaml is exactly that gets the current one; Dagster's files in it stay as they are.
_WRITTEN_BY_0_2 = """\
event_log_storage:
  module: dagster_project.event_log
  class: PooledSqliteEventLogStorage
  config:
    home:
      env: DAGSTER_HOME
"""


class HomeError(RuntimeError):
    """The Dagster home cannot be opened; the message names it and what to do."""


def lake_key(lake: Lake) -> str:
    """The lake as one folder name: its last path part, to be read, and a hash of its URL and catalog, to be unique
    (two lakes of one folder name, or one folder under two catalogs, are two lakes)."""
    digest = hashlib.sha256(f"{lake.url}\n{lake.catalog.describe()}".encode()).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", posixpath.basename(lake.url.rstrip("/")))[:40].strip(".")
    return f"{name or 'lake'}-{digest}"


def dagster_home(lake: Lake) -> Path:
    """The home of ``lake``'s runs: ``$DAGSTER_HOME`` when set (a user's, which may hold several lakes' records),
    else ``~/.tracelake/dagster/<lake key>``, created; the environment is only read.

    A default home per lake, so that ``tracelake ui --lake A`` shows A's runs alone, without anything exported.
    A home without a dagster.yaml gets one (Dagster's defaults; a default home's without telemetry); a user's own is
    left alone.
    """
    explicit = os.environ.get("DAGSTER_HOME")
    home = Path(explicit).expanduser().absolute() if explicit else DEFAULT_ROOT / lake_key(lake)
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists() or config.read_text() in (_WRITTEN_BY_0_2, QUIET + _WRITTEN_BY_0_2):
        partial = home / f".dagster.yaml.{os.getpid()}"  # whole or not at all: processes may start at once
        partial.write_text("" if explicit else QUIET)
        partial.replace(config)
    return home


@contextlib.contextmanager
def opening_instance(home: Path) -> Iterator[None]:
    """Held while a process opens the instance of ``home``, one process at a time; a failure to open it becomes a
    :class:`HomeError` naming the home.

    Dagster creates a new home's SQLite tables and stamps their schema version without a lock: two processes
    opening a new home at once (concurrent ``tracelake ingest``) can stamp two versions, and every later open of
    that home then fails ("more than one head"). Opening an existing home takes ~0.2 s, so the wait is short.
    """
    with open(home / ".instance.lock", "w") as lock:  # released when closed, by a killed process too
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        except Exception as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]  # Dagster's first line, or the kind
            raise HomeError(
                f"cannot open the Dagster home {home} (DAGSTER_HOME, where ingests record their runs): "
                f"{reason}. The lake does not depend on it: move the home aside (it holds "
                "the run history shown by 'tracelake ui') or point DAGSTER_HOME elsewhere, and ingest again."
            ) from exc
