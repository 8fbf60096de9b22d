"""End to end against a real S3 server: SeaweedFS (``weed mini``) on loopback, signatures enforced."""

from __future__ import annotations

import re

import orjson

from pipelines.lake.read import open_lake, table_files
from pipelines.tables import RAW_TABLES

AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE")


def test_ingest_from_and_into_seaweedfs(seaweedfs_s3, cli, make_source, expected_counts, monkeypatch,
                                        postgres_database):
    """Traces and lake data on SeaweedFS, the lake's catalog on PostgreSQL: ingest, query, re-ingest."""
    monkeypatch.setenv("TRACELAKE_CATALOG", postgres_database)
    for name in AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in seaweedfs_s3.env().items():
        monkeypatch.setenv(name, value)
    source = make_source({
        "job/simple_add": ["simple_add/alexnet_trace.json.gz"],
        "job/cpu_only": ["edge_cases/cpu_only_rank34.json.gz"],
    })
    seaweedfs_s3.make_bucket("traces-bucket")
    seaweedfs_s3.make_bucket("lake-bucket")
    seaweedfs_s3.upload_folder("traces-bucket", "incoming", source)

    ingest = cli("ingest", "s3://traces-bucket/incoming", "--lake", "s3://lake-bucket/lake")
    assert ingest.returncode == 0, ingest.output
    assert "found 2 trace files in 2 runs" in ingest.stdout

    query = cli("sql", "select 'kernels' as t, run_id, count(*) as n from kernels group by all "
                "union all select 'cpu_ops', run_id, count(*) from cpu_ops group by all",
                "--lake", "s3://lake-bucket/lake", "--format", "json")
    assert query.returncode == 0, query.output
    counts = {(r["t"], r["run_id"]): r["n"] for r in orjson.loads(query.stdout)}
    expected = {(t, f"job.{run}"): n for (t, run), n in expected_counts(source / "job").items()}
    assert counts == expected and expected[("kernels", "job.simple_add")] > 0

    # The object layout of the contract, LAKE/<layer>/<table>/run_id=<id>/*.parquet, holding exactly the catalog's
    # files, also after a run is ingested again.
    again = cli("ingest", "s3://traces-bucket/incoming", "--lake", "s3://lake-bucket/lake")
    assert again.returncode == 0, again.output
    keys = seaweedfs_s3.list_keys("lake-bucket", "lake/")
    # The version replaced stays readable for the retention, outside the tables' folders.
    expired = {k for k in keys if k.endswith(".parquet") and k.startswith("lake/_expired/")
               and not k.startswith("lake/_expired/meta/")}  # tracelake's own claims, outside the layers
    parquet = {k for k in keys if k.endswith(".parquet") and not k.startswith(("lake/_staging/", "lake/_expired/"))}
    layout = re.compile(r"lake/(raw|marts)/(\w+)/run_id=(job\.\w+)/(ducklake|tracelake)-[\w-]+\.parquet")
    assert parquet and all(layout.fullmatch(k) for k in parquet), [k for k in parquet if not layout.fullmatch(k)]
    assert expired and all(layout.fullmatch(k.replace("lake/_expired/", "lake/", 1)) for k in expired), [
        k for k in expired if not layout.fullmatch(k.replace("lake/_expired/", "lake/", 1))]
    written = {layout.fullmatch(k).group(2) for k in parquet if k.startswith("lake/raw/")}
    assert {"traces", "kernels", "cpu_ops"} <= written <= set(RAW_TABLES)  # a table with no rows has no file
    files = cli("sql", "select count(*) as n from kernels", "--lake", "s3://lake-bucket/lake", "--format", "json")
    assert files.returncode == 0, files.output
    con = open_lake("s3://lake-bucket/lake")
    committed = {f.removeprefix("s3://lake-bucket/") for urls in table_files(con).values() for f in urls}
    assert committed == parquet
    # Of the staging area, only the committed versions' placed files stay (for the retention).
    assert not [k for k in keys if "_staging" in k and k.endswith(".parquet") and "/commit/" not in k]

    # A wrong secret is refused by the server (signatures are checked) and never echoed.
    wrong = "wrong-secret-Hq93Lm"
    denied = cli("sql", "select count(*) from kernels", "--lake", "s3://lake-bucket/lake",
                 env={"AWS_SECRET_ACCESS_KEY": wrong}, timeout=120)
    assert denied.returncode == 2, denied.output
    assert "Traceback" not in denied.output and ("signature" in denied.stderr or "Forbidden" in denied.stderr)
    for secret in (wrong, seaweedfs_s3.secret_key):
        assert secret not in denied.output and secret not in ingest.output
