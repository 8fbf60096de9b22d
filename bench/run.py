"""Benchmark: ``tracelake ingest`` of a large trace against HTA 0.5.0's load of it, side by side.

For each size a trace is built once with :mod:`bench.make_trace` (cached under ``bench/out/traces``). Then, in
alternating rounds, HTA's ``TraceAnalysis(trace_dir=…)`` and ``tracelake ingest`` (raw tables, every analysis
table, the reports and the Dagster record) each run as a whole command in a process of their own: wall time from
start to exit (interpreter and imports included), peak RSS of that process and its children. Ours is split where
its progress lines appear: launch to the last trace parsed (the first trace's parse starts before Dagster's import
and overlaps it), to the analysis tables committed, and to the exit. Figures are medians over the
rounds; ``--shared`` also times the ingest of the shared traces (one run per folder), one run at a time and with
``--jobs 2``, alternating.

Ratios are only worth taking on a quiet machine: the bench waits for the 1-minute load average to fall below
0.5, prints it before and after, measures the CPU that other processes used while it ran (``/proc/stat`` minus its
own children's), and reports ratios only when both say the machine was quiet.

    python bench/run.py --sizes 234MB --rounds 3 --shared
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
SHARED_TRACES = ROOT.parent / "shared" / "traces"
sys.path.insert(0, str(ROOT))

from bench.make_trace import DEFAULT_SOURCE  # noqa: E402
from dagster_project.home import POOLED_EVENT_LOG, QUIET  # noqa: E402

QUIET_LOAD = 0.5  # 1-minute load average below which the machine counts as quiet
QUIET_OTHERS_CORES = 0.15  # CPU other processes may use, on average, while the bench runs
HTA_LOAD = "import sys; from hta.trace_analysis import TraceAnalysis; TraceAnalysis(trace_dir=sys.argv[1])"
_PARSED = re.compile(r"events in [\d.]+ s")
_TABLES = re.compile(r"analysis tables in [\d.]+ s")


@dataclass
class Timed:
    """One command's run: wall seconds, CPU seconds (with its children), peak RSS in MiB, and its output lines
    with the seconds from its start at which each appeared."""

    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    lines: list[tuple[float, str]]

    @property
    def stdout(self) -> str:
        return "".join(line for _, line in self.lines)


def run_timed(command: list[str], env: dict[str, str] | None = None, ok_codes: tuple[int, ...] = (0,)) -> Timed:
    """Run ``command`` to its end; ``wait4`` gives its own CPU time and peak RSS (children included)."""
    lines: list[tuple[float, str]] = []
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT, env=env)

    def read() -> None:  # the commands flush each progress line
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append((time.perf_counter() - started, line.decode(errors="replace")))

    reader = threading.Thread(target=read)
    reader.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    reader.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    timed = Timed(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, lines)
    if proc.returncode not in ok_codes:
        raise RuntimeError(f"{' '.join(command)} exited {proc.returncode}:\n{timed.stdout[-3000:]}")
    return timed


class CpuMeter:
    """CPU seconds the whole machine spent busy, from ``/proc/stat``; minus ours, what others used."""

    def __init__(self) -> None:
        self.started, self.busy_at_start = time.perf_counter(), self._busy_s()

    @staticmethod
    def _busy_s() -> float:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")

    def others_cores(self, ours_cpu_s: float) -> float:
        """Average cores busy with other work since the meter started."""
        wall = time.perf_counter() - self.started
        return max(0.0, self._busy_s() - self.busy_at_start - ours_cpu_s) / wall


def wait_for_quiet(limit_s: float) -> float:
    """Wait up to ``limit_s`` for the 1-minute load average to fall below QUIET_LOAD; returns it."""
    deadline = time.monotonic() + limit_s
    while (load := os.getloadavg()[0]) >= QUIET_LOAD and time.monotonic() < deadline:
        time.sleep(5)
    return load


def ensure_trace(size: str, source: Path) -> Path:
    """The folder holding the ``size`` trace (one run, one rank), built on first use."""
    trace_dir = OUT / "traces" / size
    path = trace_dir / "rank-0.json.gz"
    if not path.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "make_trace.py"), "--source", str(source),
                        "--size", size, "--out", str(path)], check=True)
    return trace_dir


class Ingest:
    """``tracelake ingest`` into a fresh lake per round, recording into one Dagster home of the bench's."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        home = scratch / "dagster_home"
        home.mkdir()
        (home / "dagster.yaml").write_text(QUIET + POOLED_EVENT_LOG)  # as the default home's: no telemetry
        self.env = dict(os.environ, DAGSTER_HOME=str(home))
        self.rounds = 0

    def __call__(self, source: Path, ok_codes: tuple[int, ...] = (0,), jobs: int = 1) -> Timed:
        self.rounds += 1
        lake = self.scratch / f"lake-{self.rounds}"
        command = [sys.executable, "-m", "tracelake.cli", "ingest", str(source), "--lake", str(lake)]
        try:
            return run_timed(command + (["--jobs", str(jobs)] if jobs > 1 else []), self.env, ok_codes)
        finally:
            shutil.rmtree(lake, ignore_errors=True)


def breakdown(timed: Timed) -> dict[str, float]:
    """Our ingest's wall time split where its progress lines appear: to the last trace parsed, to the analysis
    tables committed, to the exit."""
    parsed = max(at for at, line in timed.lines if _PARSED.search(line))
    committed = max(at for at, line in timed.lines if _TABLES.search(line))
    return {"parsed_s": parsed, "tables_s": committed - parsed, "after_s": timed.wall_s - committed}


def median_of(runs: list[Timed], parts: list[dict[str, float]] | None = None) -> dict[str, Any]:
    """Medians over the rounds of wall, CPU and peak RSS, and of each of ``parts`` (one dict per round)."""
    summary: dict[str, Any] = {key: statistics.median(getattr(r, key) for r in runs)
                               for key in ("wall_s", "cpu_s", "peak_rss_mb")}
    summary["wall_s_rounds"] = [round(r.wall_s, 2) for r in runs]
    if parts:
        summary.update({key: statistics.median(p[key] for p in parts) for key in parts[0]})
    return summary


def bench_size(size: str, source: Path, rounds: int, ingest: Ingest) -> tuple[dict[str, Any], float]:
    """Alternating rounds of HTA's load and our ingest of one trace; returns the medians and our CPU seconds."""
    trace_dir = ensure_trace(size, source)
    hta: list[Timed] = []
    ours: list[Timed] = []
    for round_no in range(1, rounds + 1):
        hta.append(run_timed([sys.executable, "-c", HTA_LOAD, str(trace_dir)]))
        ours.append(ingest(trace_dir))
        print(f"  {size} round {round_no}: HTA {hta[-1].wall_s:.2f} s {hta[-1].peak_rss_mb:.0f} MB, "
              f"tracelake {ours[-1].wall_s:.2f} s {ours[-1].peak_rss_mb:.0f} MB", flush=True)
    result = {"size": size, "hta": median_of(hta),
              "tracelake": median_of(ours, [breakdown(r) for r in ours])}
    return result, sum(t.cpu_s for t in hta + ours)


def bench_shared(rounds: int, ingest: Ingest) -> tuple[dict[str, Any], float]:
    """Our ingest of every shared trace (one run per folder), one run at a time and ``--jobs 2`` alternating."""
    runs: dict[int, list[Timed]] = {1: [], 2: []}
    for _ in range(rounds):
        for jobs, timed in runs.items():
            timed.append(ingest(SHARED_TRACES, ok_codes=(0, 1), jobs=jobs))  # 1: edge_cases is broken on purpose
    for jobs, timed in runs.items():
        print(f"  shared traces, --jobs {jobs}: {', '.join(f'{r.wall_s:.2f} s' for r in timed)}", flush=True)
    found = re.search(r"in ([\d,]+) runs? under", runs[1][0].stdout)
    return {"runs": int(found.group(1).replace(",", "")) if found else 0,
            "tracelake": median_of(runs[1]), "tracelake_jobs_2": median_of(runs[2])}, \
        sum(r.cpu_s for timed in runs.values() for r in timed)


def render(report: dict[str, Any]) -> str:
    """The figures as markdown, with ratios only when the machine was quiet."""
    quiet = report["quiet"]
    lines = [f"`{report['command']}`", "",
             f"load average before {report['load_before']:.2f}, after {report['load_after']:.2f}; other processes "
             f"used {report['others_cores']:.2f} cores on average" + ("" if quiet else
             " — the machine was busy: ratios not reported"), "",
             "| trace | tool | wall s (median) | rounds | CPU s | peak RSS MB | speed vs HTA | memory vs HTA |",
             "|---|---|---:|---|---:|---:|---:|---:|"]
    for row in report["sizes"]:
        hta, ours = row["hta"], row["tracelake"]
        speed = f"{hta['wall_s'] / ours['wall_s']:.1f}x" if quiet else "-"
        memory = f"{ours['peak_rss_mb'] / hta['peak_rss_mb']:.2f}" if quiet else "-"
        for name, m, ratios in (("HTA `TraceAnalysis` load", hta, ("", "")),
                                ("`tracelake ingest`", ours, (speed, memory))):
            lines.append(f"| {row['size']} | {name} | {m['wall_s']:.2f} | {m['wall_s_rounds']} | {m['cpu_s']:.2f} "
                         f"| {m['peak_rss_mb']:.0f} | {ratios[0]} | {ratios[1]} |")
        lines.append(f"| {row['size']} | ours: to parsed (from launch) / analysis tables + commit / to exit | "
                     f"{ours['parsed_s']:.2f} / {ours['tables_s']:.2f} / {ours['after_s']:.2f} | | | | | |")
    if "shared" in report:
        for key, name in (("tracelake", "`tracelake ingest`"), ("tracelake_jobs_2", "`tracelake ingest --jobs 2`")):
            shared = report["shared"][key]
            lines.append(f"| shared traces ({report['shared']['runs']} runs) | {name} | "
                         f"{shared['wall_s']:.2f} | {shared['wall_s_rounds']} | {shared['cpu_s']:.2f} "
                         f"| {shared['peak_rss_mb']:.0f} | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="234MB")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of HTA and ours (at least 3)")
    parser.add_argument("--shared", action="store_true", help="also time the ingest of the shared traces")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the trace repeated to each size")
    parser.add_argument("--settle", type=float, default=180, help="seconds to wait for a quiet machine")
    args = parser.parse_args(argv)
    if args.rounds < 3:
        parser.error("--rounds: at least 3, for a median")

    OUT.mkdir(parents=True, exist_ok=True)
    for size in args.sizes.split(","):
        ensure_trace(size, args.source)  # built before the quiet wait and the meter
    load_before = wait_for_quiet(args.settle)
    print(f"load average before: {load_before:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tracelake-bench-", dir=OUT) as scratch:
        ingest = Ingest(Path(scratch))
        ingest(ensure_trace(args.sizes.split(",")[0], args.source))  # untimed: creates the Dagster home, warms caches
        meter, ours_cpu = CpuMeter(), 0.0
        report: dict[str, Any] = {"command": "python bench/run.py " + " ".join(argv or sys.argv[1:]), "sizes": []}
        for size in args.sizes.split(","):
            row, cpu = bench_size(size, args.source, args.rounds, ingest)
            report["sizes"].append(row)
            ours_cpu += cpu
        if args.shared:
            report["shared"], cpu = bench_shared(args.rounds, ingest)
            ours_cpu += cpu
        report["others_cores"] = meter.others_cores(ours_cpu)
    report["load_before"], report["load_after"] = load_before, os.getloadavg()[0]
    report["quiet"] = load_before < QUIET_LOAD and report["others_cores"] < QUIET_OTHERS_CORES
    print(f"load average after: {report['load_after']:.2f}", flush=True)
    (OUT / "results.json").write_text(json.dumps(report, indent=2))
    table = render(report)
    (OUT / "results.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
