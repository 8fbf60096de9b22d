"""The Dagster instance home that ``tracelake ingest`` records into and ``tracelake ui`` shows."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine

DEFAULT_HOME = Path("~/.tracelake/dagster").expanduser()
QUIET = "telemetry:\n  enabled: false\n"  # the default home's whole dagster.yaml before the event log below
# Named, not imported: ``tracelake ui`` starts without importing Dagster. Its files are where Dagster's
# default storage keeps them (``home`` is read from DAGSTER_HOME, as is this file); only connections differ.
POOLED_EVENT_LOG = """\
event_log_storage:
  module: dagster_project.event_log
  class: PooledSqliteEventLogStorage
  config:
    home:
      env: DAGSTER_HOME
"""


class HomeError(RuntimeError):
    """The Dagster home cannot be opened; the message names it and what to do."""


def dagster_home() -> Path:
    """``$DAGSTER_HOME`` when set, else ``~/.tracelake/dagster``, created and exported so Dagster finds it.

    One default for every command, so the runs an ingest records show in the UI without anything exported.
    A home without a dagster.yaml gets one naming the pooled event log storage; a user's own is left alone.
    """
    home = Path(os.environ.get("DAGSTER_HOME") or DEFAULT_HOME)
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    ours = home == DEFAULT_HOME  # ours is also quiet
    if not config.exists() or (ours and config.read_text() == QUIET):
        partial = home / f".dagster.yaml.{os.getpid()}"  # whole or not at all: processes may start at once
        partial.write_text((QUIET if ours else "") + POOLED_EVENT_LOG)
        partial.replace(config)
    os.environ["DAGSTER_HOME"] = str(home)
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


@functools.cache  # one listener per home, however often the instance is made
def skip_history_fsync(home: Path) -> None:
    """Let the SQLite files of a local Dagster ``home`` commit without waiting for the disk.

    Dagster's SQLite storage opens a connection and commits once or twice per event, about 350 events per run
    (materializations, checks, step outputs): with SQLite's default fsync per commit that cost ~3,450 fdatasyncs
    (~1,150 commits), a few seconds of every ingest. Without them a killed process still loses nothing (the OS keeps the writes); only a
    power loss or OS crash can damage the run history, which records the lake and is not the lake (its catalog
    keeps its own settings). A home on PostgreSQL is not touched.
    """
    prefix = str(home.resolve()) + os.sep

    @event.listens_for(Engine, "connect")
    def _no_fsync(dbapi_connection: object, _record: object) -> None:
        if isinstance(dbapi_connection, sqlite3.Connection):
            files = [row[2] for row in dbapi_connection.execute("pragma database_list")]
            if any(path.startswith(prefix) for path in files):
                dbapi_connection.execute("pragma synchronous = off")
