"""End to end against a real S3 server: SeaweedFS (``weed mini``) on loopback, signatures enforced."""

from __future__ import annotations

import re

import orjson

from pipelines.tables import RAW_TABLES

AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE")


def test_ingest_from_and_into_seaweedfs(seaweedfs_s3, cli, make_source, expected_counts, monkeypatch):
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

    # The object layout of the contract: LAKE/<layer>/<table>/run_id=<id>/<version>-<name>.parquet + manifests.
    keys = seaweedfs_s3.list_keys("lake-bucket", "lake/")
    parquet = [k for k in keys if k.endswith(".parquet")]
    manifests = [k for k in keys if k.startswith("lake/_manifests/")]
    assert sorted(manifests) == [f"lake/_manifests/{layer}/job.{run}.json"
                                 for layer in ("marts", "raw") for run in ("cpu_only", "simple_add")]
    layout = re.compile(r"lake/(raw|marts)/(\w+)/run_id=(job\.\w+)/v\w+-[\w.~-]+\.parquet")
    assert parquet and all(layout.fullmatch(k) for k in parquet), parquet
    raw_tables = {layout.fullmatch(k).group(2) for k in parquet if k.startswith("lake/raw/")}
    assert raw_tables == set(RAW_TABLES)
    named = set()
    for key in manifests:
        manifest = orjson.loads(seaweedfs_s3.read("lake-bucket", key))
        named |= {f"lake/{p}" for paths in manifest["tables"].values() for p in paths}
    assert named == set(parquet)

    # A wrong secret is refused by the server (signatures are checked) and never echoed.
    wrong = "wrong-secret-Hq93Lm"
    denied = cli("sql", "select count(*) from kernels", "--lake", "s3://lake-bucket/lake",
                 env={"AWS_SECRET_ACCESS_KEY": wrong}, timeout=120)
    assert denied.returncode == 2, denied.output
    assert "Traceback" not in denied.output and "signature" in denied.stderr
    for secret in (wrong, seaweedfs_s3.secret_key):
        assert secret not in denied.output and secret not in ingest.output


def test_rewrite_replaces_run_on_seaweedfs(seaweedfs_s3, monkeypatch, tmp_path):
    """SeaweedFS keeps empty prefixes listed after deletes: rewrites must still leave one version per run."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipelines.lake import Lake
    from pipelines.sources import discover_runs

    for name in AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    options = {"key": seaweedfs_s3.access_key, "secret": seaweedfs_s3.secret_key,
               "client_kwargs": {"endpoint_url": seaweedfs_s3.endpoint}}
    seaweedfs_s3.make_bucket("rewrite-bucket")
    local = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": [1]}), local)
    lake = Lake("s3://rewrite-bucket", options)  # a lake at the bucket's root
    for name in ("a", "b", "c"):
        lake.write_run("raw", "r1", {"kernels": [(name, local)], "cpu_ops": [(name, local)]})
    lake.write_run("raw", "r2", {"kernels": [("z", local)]})
    keys = [k for k in seaweedfs_s3.list_keys("rewrite-bucket") if k.endswith(".parquet")]
    assert sorted(k.rsplit("-", 1)[-1] + "@" + k.split("/")[1] for k in keys) == [
        "c.parquet@cpu_ops", "c.parquet@kernels", "z.parquet@kernels"]
    assert set(lake.committed_files("raw")) == {"kernels", "cpu_ops"}
    assert len(lake.committed_files("raw")["kernels"]) == 2
    # The lake's own files are never taken for traces when SOURCE is the same bucket.
    assert discover_runs("s3://rewrite-bucket", options) == []
