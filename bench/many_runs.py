"""Benchmark: SQL across 1,000 runs.

Ingests the shipped example traces once, then writes N synthetic runs into a fresh lake through
the lake's own commit protocol (manifests, Hive partitions): each copies one real run's raw and
mart files, with its kernel durations scaled by a per-run factor in [0.8, 1.2] so cross-run
answers differ by run. Then it times what a user does across runs: open the lake, run
cross-run queries, refresh the DuckDB catalog file and query through it, and a query pruned
to one run.

    python bench/many_runs.py [--runs 1000] [--out bench/out/many_runs.json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipelines.lake import LAYERS, Lake  # noqa: E402
from tracelake.ingest import ingest  # noqa: E402
from transforms.catalog import open_lake, write_catalog  # noqa: E402

QUERIES = {
    "top kernels over all runs": """
        select name, count(*) as calls, sum(dur_ns) as total_ns, count(distinct run_id) as runs
        from kernels group by name order by total_ns desc limit 10""",
    "kernel time per run, p50/p99 over runs": """
        select quantile_cont(total_ns, 0.5), quantile_cont(total_ns, 0.99), count(*)
        from (select run_id, sum(dur_ns) as total_ns from kernels group by run_id)""",
    "runs mart joined with per-run kernel time": """
        select r.device_name, count(*) as runs, avg(k.kernel_ns) as mean_kernel_ns
        from runs as r join (select run_id, sum(dur_ns) as kernel_ns from kernels group by run_id) as k using (run_id)
        group by r.device_name order by runs desc""",
}
ONE_RUN = "select count(*), sum(dur_ns) from kernels where run_id = 'job0500'"


def _timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def build_lake(template: Lake, lake: Lake, runs: int, work: Path) -> None:
    """Write ``runs`` synthetic runs into ``lake``, each a copy of a template run with scaled kernel durations."""
    rng = random.Random(7)
    templates = {layer: {m.run_id: m for m in template.manifests(layer)} for layer in LAYERS}
    names = sorted(templates["raw"])
    con = duckdb.connect()
    for i in range(runs):
        source, run_id, factor = names[i % len(names)], f"job{i:04d}", rng.uniform(0.8, 1.2)
        for layer in LAYERS:
            files: dict[str, list[tuple[str, Path]]] = {}
            for table, paths in templates[layer][source].tables.items():
                entries = []
                for n, rel in enumerate(paths):
                    local = Path(template.url_of(rel))
                    if table == "kernels":
                        scaled = work / f"{run_id}-{n}.parquet"
                        con.execute(
                            "copy (select * replace (cast(dur_ns * $f as bigint) as dur_ns) from read_parquet($p)) "
                            "to '" + str(scaled) + "' (format parquet)", {"f": factor, "p": str(local)},
                        )
                        local = scaled
                    entries.append((f"t{n}", local))
                files[table] = entries
            lake.write_run(layer, run_id, files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "many_runs.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tracelake-bench-") as tmp:
        tmp_path = Path(tmp)
        ingest(str(ROOT / "examples" / "traces"), str(tmp_path / "template"))
        lake = Lake(str(tmp_path / "lake"))
        _, build_s = _timed(lambda: build_lake(Lake(str(tmp_path / "template")), lake, args.runs, tmp_path))
        files = sum(1 for p in (tmp_path / "lake").rglob("*.parquet"))
        print(f"wrote {args.runs} runs ({files:,} Parquet files) in {build_s:.1f} s", flush=True)

        results: dict[str, object] = {"runs": args.runs, "parquet_files": files, "build_s": round(build_s, 2)}
        con, results["open_lake_s"] = _timed(lambda: open_lake(str(lake.url)))
        for title, query in QUERIES.items():
            rows, seconds = _timed(lambda q=query: con.execute(q).fetchall())
            results[f"query: {title} (s)"] = round(seconds, 3)
            print(f"{title}: {seconds:.3f} s, first row {rows[0]}", flush=True)
        _, results["one run, pruned (s)"] = _timed(lambda: con.execute(ONE_RUN).fetchall())
        catalog, results["write_catalog_s"] = _timed(lambda: write_catalog(lake, tmp_path / "lake" / "catalog.duckdb"))
        with duckdb.connect(str(catalog), read_only=True) as cat:
            _, results["catalog: top kernels over all runs (s)"] = _timed(
                lambda: cat.execute(QUERIES["top kernels over all runs"]).fetchall())
        results["catalog_bytes"] = catalog.stat().st_size
    results = {k: round(v, 3) if isinstance(v, float) else v for k, v in results.items()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
