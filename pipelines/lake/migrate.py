"""Convert a lake written by tracelake 0.1 (per-run JSON manifests naming Parquet files) into a DuckLake, in place."""

from __future__ import annotations

import posixpath

import orjson

from pipelines.lake.commit import expire_old_versions, replace_run
from pipelines.lake.lake import LAYERS, LEGACY_MANIFESTS, Lake
from pipelines.rows import sql_path
from pipelines.settings import RETENTION


def migrate_manifests(lake: Lake) -> int:
    """Commit every run the manifests name, one transaction a run, then delete the old files; returns the runs.

    A run's tables are read from the files its manifests commit (``run_id`` taken from the manifest, not the
    path). The old files and manifests go only once every run is in the catalog, so a conversion that stops
    half-way can simply be run again.
    """
    manifests = posixpath.join(lake.root, LEGACY_MANIFESTS)
    runs: dict[str, dict[str, str]] = {}
    old_files: list[str] = []
    for layer in LAYERS:
        folder = posixpath.join(manifests, layer)
        for path in sorted(lake.fs.glob(posixpath.join(folder, "*.json"))):
            manifest = orjson.loads(lake.fs.cat_file(path))
            for table, files in manifest["tables"].items():
                urls = [lake.url_of(relative) for relative in files]
                old_files += [posixpath.join(lake.root, relative) for relative in files]
                runs.setdefault(manifest["run_id"], {})[f"{layer}.{table}"] = (
                    "select * from read_parquet([" + ", ".join(sql_path(u) for u in urls) + "], "
                    "hive_partitioning = false, union_by_name = true)"
                )
    with lake.connect() as con:
        for run_id, sources in runs.items():
            replace_run(con, run_id, sources, info={"migrated_from": "tracelake 0.1 manifests"})
        expire_old_versions(con, RETENTION.text())
    if old_files:
        lake.fs.rm(old_files)
    lake.fs.rm(manifests, recursive=True)
    legacy_catalog = posixpath.join(lake.root, "catalog.duckdb")
    if lake.fs.exists(legacy_catalog):
        lake.fs.rm(legacy_catalog)
    return len(runs)
