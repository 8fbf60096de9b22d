"""``tracelake ingest`` / ``tracelake sql`` against moto's S3 server: env credentials, explicit options, no leaks."""

from __future__ import annotations

import collections
import io
import logging

import orjson
import pyarrow.parquet as pq
import pytest

from transforms.catalog import open_lake

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


def _counts(cli, lake: str, *options: str) -> dict[tuple[str, str], int]:
    result = cli("sql", COUNT_SQL, "--lake", lake, "--format", "json", *options)
    assert result.returncode == 0, result.output
    return {(r["t"], r["run_id"]): r["n"] for r in orjson.loads(result.stdout) if r["n"]}


def _set_aws_env(monkeypatch: pytest.MonkeyPatch, server, **overrides: str) -> None:
    for name in AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in server.env(**overrides).items():
        monkeypatch.setenv(name, value)


def test_ingest_and_query_with_aws_environment(moto_s3, cli, make_source, expected_counts, monkeypatch):
    """Standard AWS variables only: ingest from s3://, write the lake to s3://, query it, re-ingest."""
    _set_aws_env(monkeypatch, moto_s3)
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
    con = open_lake("s3://env-bucket/lake")
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
    con = open_lake("s3://env-bucket/lake")
    assert {(t, r): n for t, r, n in con.sql(COUNT_SQL).fetchall() if n} == dict(expected)
    con.close()
    keys_after = moto_s3.list_keys("env-bucket", "lake/")
    # Same objects, but the run's partition files are all of a new version: replaced, not duplicated.
    assert len(keys_after) == len(keys_before)
    replaced = {k for k in keys_before if k.endswith(".parquet") and "/run_id=simple_add/" in k}
    assert replaced and not replaced & set(keys_after)
    assert {k for k in keys_before if "/run_id=simple_add/" not in k} <= set(keys_after)
    # Every parquet object is named by exactly one manifest, and every manifest names only existing objects.
    named = set()
    for key in (k for k in keys_after if k.startswith("lake/_manifests/")):
        manifest = orjson.loads(moto_s3.read("env-bucket", key))
        named |= {f"lake/{p}" for paths in manifest["tables"].values() for p in paths}
    assert named == {k for k in keys_after if k.endswith(".parquet")}


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

    # No AWS variable at all. The explicit options travel in Dagster resource config: a persistent
    # instance (DAGSTER_HOME) is used so that its run storage can be scanned for the secret too.
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
    for key, body in _lake_strings(moto_s3, "opt-bucket", ""):
        assert secret.encode() not in body, key
    scanned = [path for path in home.rglob("*") if path.is_file()]
    assert scanned
    for path in scanned:
        assert secret.encode() not in path.read_bytes(), path


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_lake_sees_commits_of_other_writers(moto_s3, monkeypatch, tmp_path):
    """s3fs caches listings: a long-lived reader must still see runs another process committed since."""
    import pyarrow as pa

    from pipelines.lake import Lake
    from pipelines.storage import filesystem

    _set_aws_env(monkeypatch, moto_s3)
    moto_s3.make_bucket("cache-bucket")
    local = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3]}), local)

    reader = Lake("s3://cache-bucket/lake")
    reader.write_run("raw", "first", {"kernels": [("a", local)]})
    assert [m.run_id for m in reader.manifests("raw")] == ["first"]  # the listing is now cached

    # Another writer: its own S3 filesystem instance, as in another process.
    writer_fs, _ = filesystem("s3://cache-bucket/lake", {"skip_instance_cache": True})
    assert writer_fs is not reader.fs
    writer = Lake("s3://cache-bucket/lake", {"skip_instance_cache": True})
    writer.write_run("raw", "second", {"kernels": [("b", local)]})
    writer.write_run("raw", "first", {"kernels": [("c", local)]})

    assert [m.run_id for m in reader.manifests("raw")] == ["first", "second"]
    assert reader.manifest("raw", "second") is not None
    assert reader.committed_files("raw")["kernels"] == [
        reader.url_of(p) for m in writer.manifests("raw") for p in m.tables["kernels"]
    ]
    # DuckDB, through the reader's filesystem, finds the other writer's new files of "first" too.
    con = open_lake("s3://cache-bucket/lake")
    assert con.sql("select run_id, count(*) from kernels group by all order by all").fetchall() == [
        ("first", 3), ("second", 3)
    ]
    con.close()
    # The reader's next write of "first" still removes the other writer's files of that run.
    reader.write_run("raw", "first", {"kernels": [("d", local)]})
    run_keys = moto_s3.list_keys("cache-bucket", "lake/raw/kernels/run_id=first/")
    assert len(run_keys) == 1 and run_keys[0].endswith("-d.parquet")


def test_reading_the_lake_lists_each_table_once_instead_of_asking_about_each_file(moto_s3, monkeypatch, tmp_path, caplog):
    """DuckDB asks the filesystem about every file it reads; s3fs answers from one listing per table, not a HEAD each."""
    import pyarrow as pa

    from pipelines.lake import Lake

    _set_aws_env(monkeypatch, moto_s3)
    moto_s3.make_bucket("listing-bucket")
    local = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3]}), local)
    writer = Lake("s3://listing-bucket/lake", {"skip_instance_cache": True})
    caplog.set_level(logging.DEBUG, logger="s3fs")

    def requests_to_read(runs: int) -> collections.Counter:
        for run in range(runs):
            writer.write_run("raw", f"run{run}", {"kernels": [("a", local), ("b", local)], "cpu_ops": [("a", local)]})
        caplog.clear()
        con = open_lake("s3://listing-bucket/lake", {"skip_instance_cache": True})  # a new reader: nothing cached
        assert con.sql("select count(*) from kernels").fetchall() == [(runs * 2 * 3,)]
        con.close()
        return collections.Counter(r.getMessage().split()[1] for r in caplog.records if r.getMessage().startswith("CALL: "))

    few, many = requests_to_read(2), requests_to_read(6)
    assert few["head_object"] == many["head_object"] == 0
    assert few["list_objects_v2"] == many["list_objects_v2"]  # per table, whatever the number of runs
    assert many["get_object"] > few["get_object"]  # manifests and kernels' files are read, one GET each
