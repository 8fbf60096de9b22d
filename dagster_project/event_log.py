"""The event log storage of a local Dagster home: Dagster's SQLite one, minus a new connection per event."""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dagster._config import StringSource
from dagster._core.storage.event_log import SqliteEventLogStorage
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._serdes import ConfigurableClassData
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine


class PooledSqliteEventLogStorage(SqliteEventLogStorage):
    """Dagster's SQLite event log (the same files and tables), keeping each shard's engine between uses.

    The base class makes an engine and opens a SQLite connection for every event it stores, again on the index
    shard for asset and check events, and again to ask whether a table exists: ~1,000 connections a run, each
    compiling its statements afresh (SQLAlchemy caches them per engine). Here the index and the most recently
    used runs keep an engine with one idle connection. No transaction stays open between uses, so the
    webserver, the daemon and other ingests share the files as before (SQLite's locks, Dagster's 30 s busy
    timeout); within a process the base class's lock still serializes every use.
    """

    SHARDS_KEPT = 8  # the index and the runs in use; the webserver paging through old runs closes the rest

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._pid = os.getpid()
        self._tables: set[str] = set()
        super().__init__(base_dir, inst_data)

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {"home": StringSource}

    @classmethod
    def from_config_value(  # type: ignore[override]
        cls, inst_data: ConfigurableClassData | None, config_value: dict[str, str]
    ) -> PooledSqliteEventLogStorage:
        # Where Dagster's default storage keeps the event log of an instance whose home is ``home``.
        return cls(os.path.join(config_value["home"], "history", "runs"), inst_data=inst_data)

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock, self._engine(shard).connect() as connection, connection.begin():
            yield connection

    def _engine(self, shard: str) -> Engine:
        """The shard's engine, made (and its database created) on first use; the caller holds ``_db_lock``."""
        if self._pid != os.getpid():  # a forked child: the parent's connections are not its to use or close
            self._engines, self._pid = OrderedDict(), os.getpid()
        engine = self._engines.get(shard)
        if engine is not None:
            self._engines.move_to_end(shard)
            return engine
        engine = create_engine(self.conn_string_for_shard(shard), pool_size=1,
                               connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
        if shard not in self._initialized_dbs:
            self._initdb(engine)
            self._initialized_dbs.add(shard)
        self._engines[shard] = engine
        if len(self._engines) > self.SHARDS_KEPT:  # the least recently used run's; the index stays
            self._engines.pop(next(name for name in self._engines if name != INDEX_SHARD_NAME)).dispose()
        return engine

    def has_table(self, table_name: str) -> bool:
        # Asked before most writes (whether a migration made the table); a table, once made, stays.
        if table_name not in self._tables and super().has_table(table_name):
            self._tables.add(table_name)
        return table_name in self._tables

    def _close_engines(self) -> None:
        with self._db_lock:
            for engine in self._engines.values():
                engine.dispose()
            self._engines.clear()

    def wipe(self) -> None:
        self._close_engines()  # before the run shards' files are deleted
        super().wipe()

    def dispose(self) -> None:
        self._close_engines()
        super().dispose()
