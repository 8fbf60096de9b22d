"""The lake: a DuckLake whose catalog holds every table's schema and snapshots, over Parquet files under ``LAKE``.

Data files live at ``LAKE/<layer>/<table>/run_id=<run_id>/*.parquet`` (layer = DuckLake schema, ``raw`` or
``marts``). The catalog is a SQLite file inside a local lake by default (``LAKE/catalog.sqlite``: SQLite lets
several processes commit to one catalog, where a DuckDB-file catalog admits one process at a time), or a
PostgreSQL database for a fleet (``--catalog`` / ``TRACELAKE_CATALOG``). Object-store data is read and written by
DuckDB's httpfs with credentials from the standard AWS variables or ``--storage-option``, held in a temporary
secret of the connection: nothing of them is stored in the catalog.

A lake whose catalog is a file inside it (the default) moves with it: the catalog records the data path relative to
itself (``./``), and every connection attaches with the lake's folder as it is now (DuckLake's
``OVERRIDE_DATA_PATH``). DuckLake 1.5.5 keeps every schema, table and file path relative to the one above it, and
the commit places adopted files in their table's folder, so the data path is the one absolute path a catalog
holds. A lake written before this recorded its absolute folder: it is read as it is (the override ignores that
folder) and converted by its first write. A catalog kept elsewhere (PostgreSQL, a file outside the lake) records
the absolute data path, and a lake whose data is not where it says is refused, never read from the old place.

A catalog that is missing, empty or unreadable beside data files is an error naming both, never a new lake over
them; and each catalog records when it was created (:data:`CREATED_KEY`), so that a file older than the catalog is
never taken for one of its orphans (:mod:`pipelines.lake.maintenance`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import posixpath
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import duckdb

from pipelines.lake.extensions import extension_connection
from pipelines.lake.fleet_views import store_fleet_views
from pipelines.lake.locks import wait_notice
from pipelines.retry import retrying
from pipelines.rows import PARQUET_COMPRESSION, PARQUET_VERSION, one, sql_path
from pipelines.settings import CATALOG
from pipelines.storage import S3Access, filesystem, full_url, http_timeout_s, is_local

LAYERS = ("raw", "marts")
ALIAS = "lake"  # the name the lake is attached under in every connection
CATALOG_FILE = "catalog.sqlite"
LEGACY_MANIFESTS = "_manifests"  # the layout before DuckLake (tracelake 0.1)
METADATA = f"__ducklake_metadata_{ALIAS}"  # where the ducklake extension attaches the catalog's own database
# Indexes on the catalog's tables, for lookups that would otherwise read a whole table, a row per file (and per
# column), at every commit and query: a run's files by partition value (pipelines.lake.commit.tables_holding_run), and
# on PostgreSQL, which runs DuckLake's filtered metadata reads itself, a table's files, deletes and column stats.
# A scan of a table reads all its files' statistics for each filtered column (DuckLake prunes them itself, not
# PostgreSQL): for ``run_id``, every table's first column and so DuckLake's column 1, a covering index answers
# that from the index alone (1.7 ms, not 14 ms, for a table of 10,000 runs; 26 MB at 10,000 runs). Expiring a
# replaced version deletes its files' statistics and partition values by file through the postgres scanner, one
# whole-table scan each without an index on the file (0.1 to 0.3 s per commit at 10,000 runs, growing with them).
CATALOG_INDEXES = {
    "tracelake_run_files": "ducklake_file_partition_value (partition_value)",
}
SERVER_CATALOG_INDEXES = CATALOG_INDEXES | {
    "tracelake_table_files": "ducklake_data_file (table_id)",
    "tracelake_table_deletes": "ducklake_delete_file (table_id)",
    "tracelake_file_stats": "ducklake_file_column_stats (table_id, column_id)",
    "tracelake_run_stats": "ducklake_file_column_stats (table_id) "
                           "include (data_file_id, value_count, null_count, min_value, max_value) where column_id = 1",
    "tracelake_file_stats_by_file": "ducklake_file_column_stats (data_file_id)",
    "tracelake_file_partitions_by_file": "ducklake_file_partition_value (data_file_id)",
}


ATTACH_ATTEMPTS = 10
CREATED_KEY = "tracelake_created_at"
"""The catalog's own record (a ``ducklake_metadata`` row, which DuckLake keeps and ignores) of when it was created:
its first snapshot's time, written by the first writer that finds it missing (for a lake made before the record
existed, its oldest snapshot still recorded then)."""
RELATIVE_DATA_PATH = "./"
"""The data path a catalog inside its lake records: the catalog's own folder."""


def _literal(value: str | int | bool | list[str]) -> str:
    """``value`` as SQL that SQLite and PostgreSQL both read: a list as an IN list."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "(" + ", ".join(map(sql_path, value)) + ")" if value else "(null)"
    return sql_path(value)


def query_catalog(
    con: duckdb.DuckDBPyConnection, template: str, **literals: str | int | bool | list[str]
) -> list[tuple[Any, ...]]:
    """Rows of ``template`` (SQL over DuckLake's tables, each named ``{m}ducklake_…``; ``{name}`` for each of
    ``literals``, inlined as SQL literals) run by the catalog's own database: SQLite and PostgreSQL use their
    indexes, where DuckDB's scanners would read whole tables."""
    (catalog,) = one(con.execute(
        "select path from duckdb_databases() where database_name = $alias", {"alias": ALIAS}
    ))
    native = catalog.split(":", 1)[0] if catalog.startswith(("sqlite:", "postgres:")) else None
    values = {"m": "" if native else f"{METADATA}."} | {name: _literal(value) for name, value in literals.items()}
    query = re.sub(r"\{(\w+)\}", lambda match: values[match[1]], template)  # one pass: values are not re-read
    if native:
        query = f"from {native}_query('{METADATA}', {sql_path(query)})"
    return con.execute(query).fetchall()


def _set_file_options(con: duckdb.DuckDBPyConnection) -> None:
    """Have DuckLake write the lake's files (the marts) as the parse writes the raw tables' (:mod:`pipelines.rows`).

    Options live in the catalog: set once, and on a lake made before they were (its older files stay as they are)."""
    wanted = {"parquet_version": str(PARQUET_VERSION), "parquet_compression": PARQUET_COMPRESSION}
    have = dict(con.execute(f"select option_name, value from {ALIAS}.options() where scope = 'GLOBAL'").fetchall())
    have["parquet_version"] = have.get("parquet_version", "").removeprefix("V")  # set as 2, shown as V2
    for name, value in wanted.items():
        if have.get(name) != value:
            con.execute(f"call {ALIAS}.set_option($name, $value)", {"name": name, "value": value})


def run_partition(run_id: str) -> str:
    """The folder of a run's files in each table's: ``run_id=<run_id>``, escaped as DuckLake escapes it."""
    return f"run_id={quote(run_id, safe='')}"


def _racing_creation(exc: BaseException) -> bool:
    """First writers of a server catalog racing to make it (its tables, schemas, options and records)."""
    if not isinstance(exc, duckdb.Error):
        return False
    message = str(exc).lower()
    return any(word in message for word in ("initialize ducklake", "duplicate key", "already exists", "conflict",
                                            "could not serialize"))


def _locked(exc: BaseException) -> bool:
    """SQLite gave up its busy wait: another process holds the catalog's lock."""
    return isinstance(exc, duckdb.Error) and "database is locked" in str(exc)


class LakeError(RuntimeError):
    """A lake that cannot be opened as asked: no catalog for an object store, an old layout, no lake at all, data
    files without their catalog, a damaged catalog, data moved away from its catalog."""


@dataclass(frozen=True)
class Catalog:
    """Where the DuckLake catalog is: ``kind`` (sqlite, postgres, duckdb) and the ATTACH target after ``ducklake:``."""

    kind: str
    target: str

    @property
    def path(self) -> Path | None:
        """The catalog's file, for file catalogs."""
        return Path(self.target.removeprefix("sqlite:")) if self.kind in ("sqlite", "duckdb") else None

    def describe(self) -> str:
        """The catalog for messages, without a password."""
        return re.sub(r"password=\S+", "password=***", self.target)


def parse_catalog(spec: str) -> Catalog:
    """A catalog from ``postgresql://user[:password]@host[:port]/db``, ``sqlite:PATH``, ``duckdb:PATH`` or a file path
    (``*.duckdb`` / ``*.ducklake``: a DuckDB file, one process at a time; anything else: SQLite)."""
    if spec.startswith(("postgresql://", "postgres://")):
        url = urlsplit(spec)
        parts = {"dbname": url.path.lstrip("/") or "postgres", "host": url.hostname or "127.0.0.1",
                 "port": str(url.port or 5432), "user": unquote(url.username or ""),
                 "password": unquote(url.password or "")}
        return Catalog("postgres", "postgres:" + " ".join(f"{k}={v}" for k, v in parts.items() if v))
    if spec.startswith("postgres:"):
        return Catalog("postgres", spec)
    kind, _, path = spec.partition(":") if spec.startswith(("sqlite:", "duckdb:")) else ("", "", spec)
    kind = kind or ("duckdb" if spec.endswith((".duckdb", ".ducklake")) else "sqlite")
    path = os.path.abspath(os.path.expanduser(path))
    return Catalog(kind, f"sqlite:{path}" if kind == "sqlite" else path)


class Lake:
    """A lake: data at a local path or ``s3://`` URL, and its DuckLake catalog."""

    def __init__(self, url: str, options: dict[str, Any] | None = None, catalog: str | None = None) -> None:
        self.url = url if "://" in url else os.path.abspath(url)
        self.options = options
        self.fs, self.root = filesystem(self.url, options)
        self.local = is_local(self.fs)
        spec = catalog or CATALOG.value()
        if not spec and not self.local:
            raise LakeError(
                f"{url} is on an object store, so its catalog must be named: "
                "--catalog postgresql://user@host:port/db (or TRACELAKE_CATALOG, or a local file path)"
            )
        self.catalog = parse_catalog(spec) if spec else Catalog("sqlite", f"sqlite:{posixpath.join(self.root, CATALOG_FILE)}")

    def __repr__(self) -> str:
        return f"Lake({self.url!r}, catalog={self.catalog.describe()!r})"

    def url_of(self, relative: str) -> str:
        """Full URL (or local path) of a path relative to the lake root."""
        return full_url(self.fs, posixpath.join(self.root, relative))

    def run_folder(self, layer: str, table: str, run_id: str) -> str:
        """Where the lake keeps the run's data files of ``layer.table``: ``LAKE/<layer>/<table>/run_id=<run_id>``,
        the value escaped as DuckLake escapes it (and reads it back)."""
        return posixpath.join(self.url.rstrip("/"), layer, table, run_partition(run_id))

    @property
    def data_path(self) -> str:
        """The DuckLake ``DATA_PATH``: the lake's root, with a trailing slash."""
        return self.url.rstrip("/") + "/"

    @property
    def catalog_inside(self) -> bool:
        """Whether the catalog is a file inside the (local) lake's folder, as by default: the two move together."""
        path = self.catalog.path
        return self.local and path is not None and Path(self.root) in path.parents

    def first_data_file(self) -> str | None:
        """A Parquet file in the lake's data folders (``raw/``, ``marts/``), relative to the lake, if there is one
        (found without listing them all)."""
        for layer in LAYERS:
            for folder, _, names in self.fs.walk(posixpath.join(self.root, layer)):
                for name in names:
                    if name.endswith(".parquet"):
                        return posixpath.relpath(posixpath.join(folder, name), self.root)
        return None

    def _refuse_new_catalog(self, state: str) -> None:
        """Raise :class:`LakeError` when the data folders hold files that a catalog in ``state`` (missing, empty,
        just created) cannot know: a new lake over them would lose them to its first maintenance. A tracelake 0.1
        lake is the exception: its manifests name its files, and ``tracelake migrate`` makes its catalog from them."""
        if self.fs.exists(posixpath.join(self.root, LEGACY_MANIFESTS)):
            return
        found = self.first_data_file()
        if found:
            raise LakeError(
                f"the lake {self.url} holds data files ({found}, ...) but its catalog {self.catalog.describe()} "
                f"is {state}: tracelake will not start a new lake over them. Restore the catalog from a backup, or "
                "move raw/ and marts/ away to start a new lake there"
            )

    def _check_catalog_file(self, read_only: bool) -> None:
        """Before attaching a file catalog: one that is missing or empty is a new lake only where no data files
        are (and only for a writer; a reader is told there is no lake)."""
        path = self.catalog.path
        if path is None or (path.exists() and path.stat().st_size > 0):
            return
        self._refuse_new_catalog("missing" if not path.exists() else "empty")
        if read_only:
            raise LakeError(self._missing())

    def exists(self) -> bool:
        """Whether a catalog is there (a lake was written): a file catalog's file, or a server catalog's tables."""
        if self.catalog.path is not None:
            return self.catalog.path.exists()
        try:
            with self._attach(read_only=True) as con:
                con.execute(f"select 1 from {ALIAS}.snapshots() limit 1").fetchall()
            return True
        except duckdb.Error:
            return False

    def _missing(self) -> str:
        """Why there is no lake to read here, and what to do."""
        if not self.fs.exists(self.root):
            return (f"{self.url} does not exist: give the folder or URL you ingested into "
                    f"(tracelake ingest SOURCE --lake {self.url})")
        return (f"{self.url} holds no tracelake lake (nothing was ingested there): "
                f"run tracelake ingest SOURCE --lake {self.url} first, or point --lake at the lake")

    def check_layout(self) -> None:
        """Raise :class:`LakeError` for a lake written by tracelake 0.1 (per-run manifests), saying how to convert it,
        and for data files whose file catalog is missing or empty (before an ingest parses anything)."""
        if self.fs.exists(posixpath.join(self.root, LEGACY_MANIFESTS)) and not self.exists():
            raise LakeError(
                f"{self.url} holds a tracelake 0.1 lake (per-run manifests, no DuckLake catalog): convert it with "
                f"`tracelake migrate --lake {self.url}`"
            )
        self._check_catalog_file(read_only=False)

    def connect(
        self, *, read_only: bool = False, threads: int | None = None, memory_limit: str | None = None,
        for_users: bool = False,
    ) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB with the lake attached as ``lake`` (schemas ``lake.raw``, ``lake.marts``).

        Every row lives in Parquet (``data_inlining_row_limit 0``), so direct reads of the files see them all.
        Reading a lake that is not there, or is in the old layout, raises :class:`LakeError`.
        """
        if not read_only:
            return self._attach(read_only=False, threads=threads, memory_limit=memory_limit)
        self.check_layout()
        missing = LakeError(self._missing())
        try:
            return self._attach(read_only=True, threads=threads, memory_limit=memory_limit, for_users=for_users)
        except duckdb.Error as exc:  # a server catalog is asked whether it holds a lake only when attaching fails
            if self.catalog.path is not None or self.exists():
                raise
            raise missing from exc

    def storage_connection(self, *, threads: int | None = None, memory_limit: str | None = None,
                           extensions: tuple[str, ...] = (), for_users: bool = False) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB that reads and writes the lake's storage (httpfs and a secret for an object store),
        without the catalog: for files outside it, such as the staging area. ``for_users``: see
        :func:`pipelines.lake.extensions.extension_connection`."""
        config: dict[str, Any] = {"threads": threads} if threads else {}
        if memory_limit:
            config["memory_limit"] = memory_limit

        con = extension_connection(extensions + (() if self.local else ("httpfs",)), config, for_users=for_users)
        # DuckDB draws it on stdout for a statement past 2 s: amid a command's output (an attach waiting for a lock, a
        # long catalog read). In Jupyter without ipywidgets DuckDB refuses the setting: it draws no bar there.
        if not for_users:
            with contextlib.suppress(duckdb.InvalidInputException):
                con.execute("set enable_progress_bar = false")
        if not self.local:
            con.execute(f"set http_timeout = {http_timeout_s()}")  # an endpoint that never answers fails, not hangs
            con.execute("set http_retries = 1")
            con.execute(S3Access.of(self.options).duckdb_secret())
        return con

    def _attach(
        self, *, read_only: bool, threads: int | None = None, memory_limit: str | None = None, for_users: bool = False
    ) -> duckdb.DuckDBPyConnection:
        self._check_catalog_file(read_only)
        con = self.storage_connection(threads=threads, memory_limit=memory_limit, extensions=self._extensions(),
                                      for_users=for_users)
        if self.catalog.kind == "postgres":
            # The postgres scanner splits a scan into ranges of 1,000 pages, each read whole with the filter (a TID
            # range scan), so DuckLake's read of one table's files read every table's: one query per scan uses the
            # index on table_id (at 10,000 runs a query pruned to one run took 45 ms with the ranges, 27 without).
            # Global: DuckLake reads its metadata through connections of its own.
            con.execute("set global pg_use_ctid_scan = false")
        # Readers name the data path too: a catalog elsewhere that records another one is refused, not read there.
        options = [f"data_path {sql_path(self.data_path)}"]
        options += ["read_only"] if read_only else ["data_inlining_row_limit 0"]
        if self.catalog_inside:
            options.append("override_data_path true")
        if read_only and self.catalog.kind == "postgres":
            # Each catalog read sees the catalog as it is, as a SQLite catalog's readers do: a file that a commit
            # moved (pipelines.lake.settle) is read where it went. In the scanner's
            # default (REPEATABLE READ) a reader kept the paths of its first read and failed to open the moved file.
            options.append("meta_isolation_level 'READ COMMITTED'")
        if not read_only and self.catalog.kind == "sqlite":
            # WAL: readers and the writer proceed at once (in the rollback journal, a reader's transaction made every
            # commit wait out SQLite's busy timeout and fail). The mode persists in the file; old catalogs convert here.
            options.append("meta_journal_mode 'wal'")
        attach = f"attach {sql_path('ducklake:' + self.catalog.target)} as {ALIAS} ({', '.join(options)})"
        # First writers of a new server catalog race to create its tables and schemas: the loser attaches again
        # and finds them made.
        try:
            with self.writer_turn() if not read_only else contextlib.nullcontext(), self._waiting():
                for attempt in retrying(ATTACH_ATTEMPTS, retry_on=_racing_creation, pause=lambda n: 0.1 * n):
                    with attempt:
                        self._attach_once(con, attach, read_only)
        except duckdb.Error as exc:
            con.close()
            raise self._attach_error(exc) from exc
        except BaseException:
            con.close()
            raise
        return con

    def _attach_once(self, con: duckdb.DuckDBPyConnection, attach: str, read_only: bool) -> None:
        """Attach, and for a writer make the catalog's schemas, indexes and records. A catalog another process
        holds locked past SQLite's busy wait is waited for as long as it takes (:meth:`_waiting` says so)."""
        while True:
            try:
                con.execute(attach)
                if not read_only:
                    self._keep_records(con)
                    for layer in LAYERS:
                        con.execute(f"create schema if not exists {ALIAS}.{layer}")
                    self._index_catalog(con)
                    _set_file_options(con)
                    store_fleet_views(con, ALIAS)
                return
            except duckdb.Error as exc:
                with contextlib.suppress(duckdb.Error):
                    con.execute(f"detach {ALIAS}")
                if not _locked(exc):
                    raise

    def _attach_error(self, exc: duckdb.Error) -> BaseException:
        """What a failed attach means for the user: a :class:`LakeError` where it is the lake's state, else ``exc``."""
        message = str(exc)
        first = message.splitlines()[0] if message else type(exc).__name__
        if "does not match existing data path" in message:
            recorded = re.search(r'existing data path in the catalog "([^"]*)"', message)
            where = recorded[1] if recorded else "another folder"
            return LakeError(
                f"the catalog {self.catalog.describe()} records the lake's data at {where}, not at {self.data_path}: "
                f"the data was moved without its catalog, or --lake names another lake. Point --lake at {where}, or "
                "move the data back (a lake whose catalog is inside it moves freely)"
            )
        if self.catalog.path is not None and any(
            sign in message for sign in ("not a database", "malformed", "unable to open", "Failed to probe",
                                         "disk I/O error", "no such table")
        ):
            return LakeError(
                f"the catalog {self.catalog.describe()} of the lake {self.url} cannot be read ({first}): restore it "
                "from a backup; the data files are read only through it"
            )
        return exc

    def _waiting(self) -> contextlib.AbstractContextManager[None]:
        """:func:`pipelines.lake.locks.wait_notice` for SQLite's locks on a file catalog (readers of a catalog still
        in the rollback journal wait for a writer's commit)."""
        path = self.catalog.path
        files = [] if path is None else [path, path.with_name(path.name + "-shm")]
        return wait_notice(f"the catalog {self.catalog.describe()}", files)

    def _keep_records(self, con: duckdb.DuckDBPyConnection) -> None:
        """A writer's first look at the catalog: a catalog DuckLake has just made (snapshot 0 only) must not start a
        lake over data files it cannot know; the creation time is recorded once; and a catalog inside its lake
        records the data path relative to itself (a lake written before that is converted here)."""
        records = dict(query_catalog(
            con, "select key, value from {m}ducklake_metadata where scope is null and key in {keys}",
            keys=["data_path", CREATED_KEY],
        ))
        if CREATED_KEY not in records:
            (latest, oldest) = one(con.execute(
                f"select max(snapshot_id), min(snapshot_time) from {ALIAS}.snapshots()"))
            if latest == 0:
                self._refuse_new_catalog("new (it holds no snapshot)")
            self._set_record(con, CREATED_KEY, oldest.isoformat(), insert=True)
        if self.catalog_inside and records.get("data_path") != RELATIVE_DATA_PATH:
            self._set_record(con, "data_path", RELATIVE_DATA_PATH, insert=False)

    def metadata_table(self, name: str) -> str:
        """A table of the catalog's own database (``ducklake_data_file``, …), as a connection of :meth:`connect`
        writes it past DuckLake."""
        return f"{METADATA}.{'public' if self.catalog.kind == 'postgres' else 'main'}.{name}"

    def _set_record(self, con: duckdb.DuckDBPyConnection, key: str, value: str, *, insert: bool) -> None:
        """Write one catalog-wide ``ducklake_metadata`` row (in the catalog's own database, outside DuckLake)."""
        table = self.metadata_table("ducklake_metadata")
        if insert:
            con.execute(f"insert into {table} (key, value) values ($key, $value)", {"key": key, "value": value})
        else:
            con.execute(f"update {table} set value = $value where key = $key and scope is null",
                        {"key": key, "value": value})

    def _extensions(self) -> tuple[str, ...]:
        """The DuckDB extensions the catalog needs (the storage's come with :meth:`storage_connection`)."""
        return ("ducklake", *((self.catalog.kind,) if self.catalog.kind in ("sqlite", "postgres") else ()))

    def _index_catalog(self, con: duckdb.DuckDBPyConnection) -> None:
        """Create the catalog's indexes the first time (DuckLake ignores indexes it did not make)."""
        if self.catalog.kind == "postgres":
            for name, on in SERVER_CATALOG_INDEXES.items():
                create = sql_path(f"create index if not exists {name} on {on}")
                try:
                    con.execute(f"call postgres_execute('{METADATA}', {create})")
                except duckdb.Error as exc:  # first writers racing: PostgreSQL's IF NOT EXISTS is not atomic
                    if "duplicate key" not in str(exc) and "already exists" not in str(exc):
                        raise
        else:
            for name, on in CATALOG_INDEXES.items():
                con.execute(f"create index if not exists {name} on {METADATA}.main.{on}")

    @contextmanager
    def writer_turn(self) -> Iterator[None]:
        """One writer at a time on a file catalog (a lock file beside it), to attach it and to commit; server
        catalogs wait for their own locks. Readers never wait (WAL).

        SQLite lets one writer commit at a time, and fails the others at once, without its busy wait, when they
        read before writing (as every DuckLake transaction does); a new catalog's first tables and two first
        writers' schemas would conflict too. So writers wait for their turn here, as long as it takes, and one that
        waits longer than a moment says whose turn it is (a hung process shows). Attaching takes a turn of its own:
        never call :meth:`connect` for writing inside one.
        """
        path = self.catalog.path
        if path is None:
            yield
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = path.with_name(f".{path.name}.lock")
        with open(lock_path, "a") as lock:  # released when the file closes
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                with wait_notice(f"another writer of the catalog (the lock {lock_path})", [lock_path], always=True):
                    fcntl.flock(lock, fcntl.LOCK_EX)
            yield
