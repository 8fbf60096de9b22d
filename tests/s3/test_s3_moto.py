"""``tracelake ingest`` / ``tracelake sql`` against moto's S3 server: env credentials, explicit options, no leaks."""

from __future__ import annotations

import contextlib
import io
import sqlite3
import zlib
from pathlib import Path

import dagster as dg
import orjson
import pyarrow.parquet as pq
import pytest

from dagster_project.record import post_records
from pipelines.lake.lake import Lake
from pipelines.lake.read import open_lake, table_files

AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE")

RUNS = {
    "nccl_rank0_of_2": ["nccl_rank0_of_2/rank-0.json.gz"],
    "simple_add": ["simple_add/alexnet_trace.json.gz"],
    "cpu_only": ["edge_cases/cpu_only_rank34.json.gz"],
}

COUNT_SQL = (
    "select 'kernels' as t, run_id, count(*) as n from kernels group by all "
    "union all select 'cpu_ops', run_id, count(*) from cpu_ops group by all"
)



def _in_tables(keys: list[str]) -> list[str]:
    return [k for k in keys if not k.startswith(("lake/_expired/", "lake/_staging/"))]

def _counts(cli, lake: str, *options: str) -> dict[tuple[str, str], int]:
    """Rows per (table, run) through ``tracelake sql``."""
    result = cli("sql", COUNT_SQL, "--lake", lake, "--format", "json", *options)
    assert result.returncode == 0, result.output
    return {(r["t"], r["run_id"]): r["n"] for r in orjson.loads(result.stdout) if r["n"]}


def _set_aws_env(monkeypatch: pytest.MonkeyPatch, server, **overrides: str) -> None:
    for name in AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in server.env(**overrides).items():
        monkeypatch.setenv(name, value)


def test_ingest_and_query_with_aws_environment(moto_s3, cli, make_source, expected_counts, monkeypatch, tmp_path):
    """Standard AWS variables only: ingest from s3://, write the lake to s3:// (catalog in a local file), query it,
    re-ingest."""
    _set_aws_env(monkeypatch, moto_s3)
    catalog = str(tmp_path / "catalog.sqlite")
    monkeypatch.setenv("TRACELAKE_CATALOG", catalog)
    source = make_source(RUNS)
    moto_s3.make_bucket("env-bucket")
    moto_s3.upload_folder("env-bucket", "traces", source)

    first = cli("ingest", "s3://env-bucket/traces", "--lake", "s3://env-bucket/lake")
    assert first.returncode == 0, first.output
    assert "found 3 trace files in 3 runs under s3://env-bucket/traces" in first.stdout

    expected = expected_counts(source)
    assert expected[("kernels", "nccl_rank0_of_2")] > 0 and expected[("cpu_ops", "cpu_only")] > 0
    assert _counts(cli, "s3://env-bucket/lake") == dict(expected)

    # In-process from here on (the CLI's own path is covered above): open_lake over the same lake.
    con = open_lake("s3://env-bucket/lake", catalog=catalog)
    assert dict(con.sql("select run_id, source_uri from traces").fetchall()) == {
        "cpu_only": "s3://env-bucket/traces/cpu_only/cpu_only_rank34.json.gz",
        "nccl_rank0_of_2": "s3://env-bucket/traces/nccl_rank0_of_2/rank-0.json.gz",
        "simple_add": "s3://env-bucket/traces/simple_add/alexnet_trace.json.gz",
    }
    con.close()
    keys_before = moto_s3.list_keys("env-bucket", "lake/")

    # Re-ingest one run (SOURCE holding the files directly: run_id is the folder name).
    again = cli("ingest", "s3://env-bucket/traces/simple_add", "--lake", "s3://env-bucket/lake")
    assert again.returncode == 0, again.output
    con = open_lake("s3://env-bucket/lake", catalog=catalog)
    assert {(t, r): n for t, r, n in con.sql(COUNT_SQL).fetchall() if n} == dict(expected)
    committed = {f.removeprefix("s3://env-bucket/") for urls in table_files(con).values() for f in urls}
    con.close()
    # The replaced version (kept under _expired/ for the retention) and the staged copies of what was committed
    # (kept in _staging/ as long) are outside the tables' folders.
    keys_before = _in_tables(keys_before)
    keys_after = _in_tables(moto_s3.list_keys("env-bucket", "lake/"))
    # Same objects, but the run's partition files are all of a new version: replaced, not duplicated.
    replaced = {k for k in keys_before if k.endswith(".parquet") and "/run_id=simple_add/" in k}
    assert replaced and not replaced & set(keys_after)
    assert {k for k in keys_before if "/run_id=simple_add/" not in k} <= set(keys_after)
    # Exactly the catalog's files are in the bucket: a plain Parquet glob reads what the catalog does.
    assert committed == {k for k in keys_after if k.endswith(".parquet")}


def _lake_strings(server, bucket: str, prefix: str) -> list[tuple[str, bytes]]:
    """(key, bytes) of every lake object, plus each Parquet file's decoded rows and key-value metadata."""
    found = []
    for key in server.list_keys(bucket, prefix):
        body = server.read(bucket, key)
        found.append((key, body))
        if key.endswith(".parquet"):
            parquet = pq.ParquetFile(io.BytesIO(body))
            table = parquet.read()
            found.append((f"{key} (rows)", str(table.to_pylist()).encode()))
            found.append((f"{key} (metadata)", repr(parquet.metadata.metadata).encode()))
            found.append((f"{key} (schema)", str(parquet.schema_arrow).encode()))
    return found


def test_explicit_options_and_credentials_never_appear(moto_s3, cli, make_source, expected_counts, monkeypatch,
                                                       tmp_path):
    """--storage-option alone reaches the server; with a bad trace, a missing bucket and an unreachable
    endpoint, the secret is in no output, no lake object, no error and no Dagster run storage."""
    for name in AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRACELAKE_CATALOG", str(tmp_path / "catalog.sqlite"))
    secret = moto_s3.secret_key
    source = make_source({"simple_add": RUNS["simple_add"], "bad": []})
    expected = expected_counts(source)
    (source / "bad" / "truncated.json").write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "na')
    moto_s3.make_bucket("opt-bucket")
    moto_s3.upload_folder("opt-bucket", "traces", source)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    credentials = ["--storage-option", f"key={moto_s3.access_key}", "--storage-option", f"secret={secret}"]
    explicit = [*credentials, "--storage-option", f'client_kwargs={{"endpoint_url": "{moto_s3.endpoint}"}}']

    # No AWS variable at all. A persistent Dagster home (DAGSTER_HOME), where the ingest leaves its runs' records and
    # the UI posts them, is scanned for the secret too.
    bad_trace = cli("ingest", "s3://opt-bucket/traces", "--lake", "s3://opt-bucket/lake", *explicit,
                    env={"DAGSTER_HOME": str(home)})
    assert bad_trace.returncode == 1, bad_trace.output
    assert "truncated" in bad_trace.output and "Traceback" not in bad_trace.output
    assert "ingested 2 runs" in bad_trace.stdout
    assert _counts(cli, "s3://opt-bucket/lake", *explicit) == expected

    # Without the options there is no endpoint and no credential: one clear line, exit 2.
    bare = cli("sql", "select count(*) from kernels", "--lake", "s3://opt-bucket/lake", timeout=120)
    assert bare.returncode == 2, bare.output
    assert len(bare.stderr.strip().splitlines()) == 1 and "Traceback" not in bare.output

    _set_aws_env(monkeypatch, moto_s3)  # from here on the secret is in the environment as well
    missing_bucket = cli("ingest", "s3://no-such-bucket/traces", "--lake", "s3://opt-bucket/lake")
    assert missing_bucket.returncode == 2, missing_bucket.output
    assert "no-such-bucket" in missing_bucket.stderr and "Traceback" not in missing_bucket.output
    assert len(missing_bucket.stderr.strip().splitlines()) == 1

    closed_port = f"http://127.0.0.1:{_closed_port()}"
    unreachable = cli("sql", "select count(*) from kernels", "--lake", "s3://opt-bucket/lake", *credentials,
                      "--storage-option", f'client_kwargs={{"endpoint_url": "{closed_port}"}}', timeout=120)
    assert unreachable.returncode == 2, unreachable.output
    assert closed_port in unreachable.stderr and "Traceback" not in unreachable.output

    for result in (bad_trace, bare, missing_bucket, unreachable):
        assert secret not in result.output
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:  # what tracelake ui does first
        posted = post_records(instance, Lake("s3://opt-bucket/lake", catalog=str(tmp_path / "catalog.sqlite")))
        assert sorted(run for runs in posted for run in runs) == ["bad", "simple_add"]
    for key, body in _lake_strings(moto_s3, "opt-bucket", ""):
        assert secret.encode() not in body, key
    assert secret.encode() not in (tmp_path / "catalog.sqlite").read_bytes()
    scanned = [path for path in home.rglob("*") if path.is_file()]
    assert scanned
    for path in scanned:
        assert secret.encode() not in path.read_bytes(), path
    stored = _dagster_values(home)
    assert any(b"simple_add" in value for value in stored)  # the runs' materializations were stored, decoded
    assert not [value[:200] for value in stored if secret.encode() in value]


def _dagster_values(home: Path) -> list[bytes]:
    """Every value in the instance's SQLite databases (runs, job snapshots, event logs), zlib blobs inflated."""
    values = []
    for path in home.rglob("*.db"):
        with sqlite3.connect(path) as db:
            for (table,) in db.execute("select name from sqlite_master where type = 'table'").fetchall():
                for row in db.execute(f'select * from "{table}"'):
                    for value in row:
                        raw = value if isinstance(value, bytes) else str(value).encode()
                        with contextlib.suppress(zlib.error):
                            raw = zlib.decompress(raw)
                        values.append(raw)
    return values


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
