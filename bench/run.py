"""Benchmark HTA's trace load against tracelake's parse and ingest on generated traces.

For each size a trace is built once with :mod:`bench.make_trace` (cached under ``bench/out/traces``),
then every step runs ``--repeat`` times, each in its own child process, so that the peak RSS
reported (the child's own high-water mark, :func:`bench.memory.peak_rss_mb`) belongs to that step alone. Wall and CPU
time are measured inside the child around the step itself (interpreter start-up and imports
excluded) and the median of the repeats is reported; CPU time (all threads) is the steadier
figure when other work shares the machine. Results go to ``bench/out/results.json`` and
``bench/out/results.md``.

    python bench/run.py --sizes 100MB,234MB,500MB,2GB --repeat 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT))

from bench.make_trace import DEFAULT_SOURCE  # noqa: E402
from bench.memory import peak_rss_mb  # noqa: E402

# HTA holds the whole trace as Python objects and then DataFrames: about 6x the JSON size at peak
# (1.4 GB for 234 MB). It is skipped where that would not fit in half the memory free now.
HTA_BYTES_PER_JSON_BYTE = 6.5
STEPS = ("hta_load", "parse", "ingest", "models")
LAKE = OUT / "lake"  # every size ingested as its own run, for the models and the cross-run query
CROSS_RUN_QUERY = """
    select run_id, kernel_type, sum(calls) as kernels, sum(total_ns) / 1e9 as seconds
    from kernel_stats group by run_id, kernel_type order by run_id, seconds desc
"""


# ----------------------------------------------------------------------------- child side


def _step_hta_load(trace_dir: Path, scratch: Path) -> dict[str, Any]:
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_dir=str(trace_dir))
    return {"rows": sum(len(df) for df in analysis.t.traces.values())}


def _step_parse(trace_dir: Path, scratch: Path) -> dict[str, Any]:
    import fsspec

    from pipelines.identity import TraceFile
    from pipelines.parse import ParseSettings, parse_trace

    path = trace_dir / "rank-0.json.gz"
    trace = TraceFile(url=str(path), run_id="bench", trace_id="rank-0", size_bytes=path.stat().st_size)
    parsed = parse_trace(fsspec.filesystem("file"), str(path), trace, workdir=scratch, settings=ParseSettings())
    return {"rows": parsed.event_count, "parquet_bytes": sum(p.stat().st_size for p in parsed.table_files.values())}


def _step_ingest(trace_dir: Path, scratch: Path) -> dict[str, Any]:
    from tracelake.cli import main as cli_main

    code = cli_main(["ingest", str(trace_dir), "--lake", str(scratch / "lake")])
    return {"exit_code": code}


def _step_models(trace_dir: Path, scratch: Path) -> dict[str, Any]:
    """Every SQL model of one run, over the raw tables already in the shared bench lake."""
    from pipelines.lake import Lake
    from transforms.runner import MARTS_MEMORY_LIMIT, build_marts, register_run_tables

    with Lake(str(LAKE)).connect(memory_limit=MARTS_MEMORY_LIMIT) as con:
        con.execute("set temp_directory = $dir", {"dir": str(scratch / "spill")})
        register_run_tables(con, trace_dir.name)
        marts = build_marts(con)
    return {"marts": len(marts)}


def _step_cross_run(trace_dir: Path, scratch: Path) -> dict[str, Any]:
    """One query over every run in the shared bench lake: kernel time by kernel type, per run."""
    from tracelake.query import run_query

    _, rows = run_query(CROSS_RUN_QUERY, str(LAKE))
    return {"rows": len(rows)}


def _child(step: str, trace_dir: Path, scratch: Path) -> None:
    started, cpu_started = time.perf_counter(), time.process_time()
    result = globals()[f"_step_{step}"](trace_dir, scratch)
    result.setdefault("wall_s", time.perf_counter() - started)
    result.setdefault("cpu_s", time.process_time() - cpu_started)
    result["peak_rss_mb"] = peak_rss_mb()
    print("BENCH_RESULT " + json.dumps(result), flush=True)


# ----------------------------------------------------------------------------- parent side


def _run_child(step: str, trace_dir: Path) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix=f"bench-{step}-", dir=OUT))
    try:
        with open(scratch / "stdout", "w+b") as stdout, open(scratch / "stderr", "w+b") as stderr:
            proc = subprocess.Popen(
                [sys.executable, __file__, "--child", step, str(trace_dir), str(scratch)],
                stdout=stdout, stderr=stderr, cwd=ROOT,
            )
            proc.wait()
            stdout.seek(0)
            stderr.seek(0)
            out, err = stdout.read().decode(), stderr.read().decode()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    lines = [line for line in out.splitlines() if line.startswith("BENCH_RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{step} failed on {trace_dir}:\n{err[-3000:]}")
    return json.loads(lines[-1].removeprefix("BENCH_RESULT "))


def _available_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def _ensure_trace(size: str, source: Path) -> tuple[Path, int]:
    trace_dir = OUT / "traces" / size
    path = trace_dir / "rank-0.json.gz"
    if not path.exists():
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "make_trace.py"), "--source", str(source), "--size", size,
             "--out", str(path)],
            check=True,
        )
    from isal import igzip

    with igzip.open(path, "rb") as f:
        uncompressed = sum(len(block) for block in iter(lambda: f.read(16 << 20), b""))
    return trace_dir, uncompressed


def _measure(step: str, trace_dir: Path, repeat: int) -> dict[str, Any]:
    runs = [_run_child(step, trace_dir) for _ in range(repeat)]
    summary = {k: v for k, v in runs[0].items() if k not in ("wall_s", "cpu_s", "peak_rss_mb")}
    for key in ("wall_s", "cpu_s", "peak_rss_mb"):
        summary[key] = statistics.median(r[key] for r in runs)
    summary["wall_s_runs"] = [round(r["wall_s"], 3) for r in runs]
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100MB,234MB,500MB,2GB")
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--tag", default="", help="suffix of the results files, to keep runs with other sizes")
    parser.add_argument("--child", nargs=3, metavar=("STEP", "TRACE_DIR", "SCRATCH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], Path(args.child[1]), Path(args.child[2]))
        return

    OUT.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(LAKE, ignore_errors=True)
    results: list[dict[str, Any]] = []
    for size in args.sizes.split(","):
        trace_dir, uncompressed = _ensure_trace(size, args.source)
        row: dict[str, Any] = {"size": size, "uncompressed_mb": uncompressed / 1e6, "steps": {}}
        for step in args.steps.split(","):
            if step == "hta_load" and uncompressed * HTA_BYTES_PER_JSON_BYTE > _available_bytes() / 2:
                row["steps"][step] = {"skipped": f"skipped: would need ~{uncompressed * HTA_BYTES_PER_JSON_BYTE / 1e9:.0f} GB"}
            else:
                if step == "models":  # the run's raw tables must be in the shared lake first
                    subprocess.run([sys.executable, "-m", "tracelake.cli", "ingest", str(trace_dir), "--lake", str(LAKE)],
                                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
                row["steps"][step] = _measure(step, trace_dir, args.repeat)
            print(f"{size} {step}: {row['steps'][step]}", file=sys.stderr, flush=True)
        results.append(row)
    if "models" in args.steps:
        cross = {"size": "all runs", "uncompressed_mb": sum(r["uncompressed_mb"] for r in results), "steps": {}}
        cross["steps"]["cross_run"] = _measure("cross_run", LAKE, args.repeat)
        results.append(cross)

    command = "python bench/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    name = f"results-{args.tag}" if args.tag else "results"
    (OUT / f"{name}.json").write_text(json.dumps({"command": command, "results": results}, indent=2))
    table = render_table(results) + "\n\n" + render_growth(results)
    (OUT / f"{name}.md").write_text(f"`{command}`\n\n{table}\n")
    print(table)


def render_growth(results: list[dict[str, Any]]) -> str:
    """How each step's time per MB and peak memory change with trace size (linear time = flat s/GB)."""
    lines = ["| step | " + " | ".join(f"{r['uncompressed_mb']:.0f} MB" for r in results if "cross_run" not in r["steps"])
             + " |", "|---|" + "---:|" * sum(1 for r in results if "cross_run" not in r["steps"])]
    steps = [s for s in STEPS if any(s in r["steps"] for r in results)]
    for step in steps:
        cells = []
        for r in results:
            if "cross_run" in r["steps"]:
                continue
            m = r["steps"].get(step, {})
            cells.append(f"{m['wall_s'] / r['uncompressed_mb'] * 1000:.1f} s/GB, {m['peak_rss_mb']:.0f} MB"
                         if "wall_s" in m else "-")
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_table(results: list[dict[str, Any]]) -> str:
    """A markdown table: one line per size and step, with ratios against HTA's load of that size."""
    lines = [
        "| size (MB) | step | wall s | CPU s | MB/s | peak RSS MB | throughput vs HTA | memory vs HTA |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results:
        mb = row["uncompressed_mb"]
        hta = row["steps"].get("hta_load", {})
        for step, m in row["steps"].items():
            if "skipped" in m:
                lines.append(f"| {mb:.0f} | {step} | {m['skipped']} | | | | | |")
                continue
            speed = mem = ""
            if "wall_s" in hta and step != "hta_load":
                speed = f"{hta['wall_s'] / m['wall_s']:.1f}x"
                mem = f"{m['peak_rss_mb'] / hta['peak_rss_mb']:.2f}"
            lines.append(
                f"| {mb:.0f} | {step} | {m['wall_s']:.2f} | {m['cpu_s']:.2f} | {mb / m['wall_s']:.0f} "
                f"| {m['peak_rss_mb']:.0f} "
                f"| {speed} | {mem} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
