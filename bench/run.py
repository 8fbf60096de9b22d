"""Benchmark: ``tracelake ingest`` against HTA 0.5.0's load of the same trace, and against an earlier commit.

Each command runs whole in a process of its own (interpreter and imports included), in alternating rounds: wall
time from start to exit, CPU seconds and peak RSS of the process and its children, medians over the rounds.

- ``--small``: the shared ``nccl_rank0_of_2`` (one 750 KB trace, 40k events) against HTA's load of it, and the
  tiny two-trace run ``simple_add`` (2 x 25 KB); ours with the Dagster record (the default) and without
  (``--no-record``); and the floor under any ingest of a run into a DuckLake (:mod:`bench.floor`).
- ``--sizes 234MB,…``: traces built once by :mod:`bench.make_trace` (cached under ``bench/out/traces``) against
  HTA's load where it fits in the memory available (about 5x the trace), with CPU seconds per GB: the size sweep
  ``--sizes 234MB,1GB,2GB,8GB``.
- ``--shared``: the ingest of the shared traces (one run per folder), one run at a time and with ``--jobs 2``.
- ``--baseline REF``: the same ingests by commit REF of this repository (a worktree under ``bench/out``), alternating
  with ours, for an A/B in one sitting.

Our ingests run in a venv holding tracelake as a user installs it (:func:`user_python`); HTA in the project's.

Ours is split where its progress lines appear: launch to the last trace parsed, the analysis tables (their own
progress line), and the rest (the commit, the report, the Dagster record, the fleet view). Ratios are only worth
taking on a quiet machine: the bench waits for the 1-minute load average to fall below 0.5, prints it before and
after, measures the CPU that other processes used while it ran (``/proc/stat`` minus its own children's), and
reports ratios only when both say the machine was quiet.

    python bench/run.py --small --sizes 234MB --shared --baseline 3ec1047 --rounds 3
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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
SHARED_TRACES = ROOT.parent / "shared" / "traces"
sys.path.insert(0, str(ROOT))

from bench.make_trace import DEFAULT_SOURCE, parse_size  # noqa: E402

QUIET_LOAD = 0.5  # 1-minute load average below which the machine counts as quiet
QUIET_OTHERS_CORES = 0.15  # CPU other processes may use, on average, while the bench runs
HTA_LOAD = "import sys; from hta.trace_analysis import TraceAnalysis; TraceAnalysis(trace_dir=sys.argv[1])"
# HTA holds about this many times a trace's size in memory (HTA#250; 1,288 MB for the 238 MB bench trace here).
HTA_MEMORY_FACTOR = 5
_PARSED = re.compile(r"events in [\d.]+ s")
_TABLES = re.compile(r"analysis tables in ([\d.]+) s")
SMALL = {"nccl_rank0_of_2": "one 750 KB trace, 40k events", "simple_add": "two 25 KB traces"}


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


def run_timed(command: list[str], env: dict[str, str] | None = None, ok_codes: tuple[int, ...] = (0,),
              cwd: Path = ROOT) -> Timed:
    """Run ``command`` to its end; ``wait4`` gives its own CPU time and peak RSS (children included)."""
    lines: list[tuple[float, str]] = []
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd, env=env)

    def read() -> None:  # the commands flush each progress line
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append((time.perf_counter() - started, line.decode(errors="replace")))  # noqa: PERF401 - timed as read

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
    """``tracelake ingest`` of one commit (this checkout, or ``checkout`` elsewhere) into a fresh lake per round.
    Each command has a user's home of its own, where it records into the default Dagster home it makes there, as a
    user's first ingest would."""

    def __init__(self, scratch: Path, name: str, checkout: Path = ROOT, options: tuple[str, ...] = ()) -> None:
        self.scratch, self.name, self.checkout, self.options = scratch / name, name, checkout, options
        (self.scratch / "home").mkdir(parents=True)
        self.env = {key: value for key, value in os.environ.items() if not key.startswith(("DAGSTER_", "TRACELAKE_"))}
        self.env |= {"HOME": str(self.scratch / "home"), "PYTHONPATH": str(checkout)}
        self.rounds = 0

    def __call__(self, source: Path, ok_codes: tuple[int, ...] = (0,), jobs: int = 1) -> Timed:
        self.rounds += 1
        lake = self.scratch / f"lake-{self.rounds}"
        command = [user_python(), "-m", "tracelake.cli", "ingest", str(source), "--lake", str(lake), *self.options]
        try:
            return run_timed(command + (["--jobs", str(jobs)] if jobs > 1 else []), self.env, ok_codes,
                             cwd=self.checkout)
        finally:
            shutil.rmtree(lake, ignore_errors=True)


def user_python() -> str:
    """The interpreter of a venv holding tracelake as a user installs it (``pip install tracelake``: its declared
    dependencies only, made once under ``bench/out``). The project's venv also holds the reference tools and pandas,
    which DuckDB imports the first time it binds a parameter wherever pandas is installed (0.2-0.3 s, ~50 MB): a
    cost of the bench's environment, not of tracelake."""
    venv = OUT / "venv-tracelake"
    if not (venv / ".installed").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "-e", str(ROOT)], check=True)
        (venv / ".installed").touch()
    return str(venv / "bin" / "python")


def baseline_checkout(ref: str) -> Path:
    """A worktree of commit ``ref`` under ``bench/out`` (made once)."""
    folder = OUT / f"baseline-{ref}"
    if not folder.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(folder), ref], check=True,
                       capture_output=True)
    return folder


def breakdown(timed: Timed) -> dict[str, float]:
    """Our ingest's wall time split where its progress lines appear: to the last trace parsed, the analysis tables'
    own time (summed over runs), and the rest to the exit."""
    parsed = max(at for at, line in timed.lines if _PARSED.search(line))
    tables = sum(float(found.group(1)) for _, line in timed.lines if (found := _TABLES.search(line)))
    return {"parsed_s": parsed, "tables_s": tables, "after_s": timed.wall_s - parsed - tables}


def median_of(runs: list[Timed], parts: list[dict[str, float]] | None = None) -> dict[str, Any]:
    """Medians over the rounds of wall, CPU and peak RSS, and of each of ``parts`` (one dict per round)."""
    summary: dict[str, Any] = {key: statistics.median(getattr(r, key) for r in runs)
                               for key in ("wall_s", "cpu_s", "peak_rss_mb")}
    summary["wall_s_rounds"] = [round(r.wall_s, 2) for r in runs]
    if parts:
        summary.update({key: statistics.median(p[key] for p in parts) for key in parts[0]})
    return summary


def alternate(rounds: int, commands: dict[str, Any], label: str) -> dict[str, list[Timed]]:
    """``rounds`` rounds of every command in turn; each round's figures printed as they come."""
    timed: dict[str, list[Timed]] = {name: [] for name in commands}
    for round_no in range(1, rounds + 1):
        for name, command in commands.items():
            timed[name].append(command())
        print(f"  {label} round {round_no}: " + ", ".join(
            f"{name} {runs[-1].wall_s:.2f} s {runs[-1].cpu_s:.2f} CPU-s {runs[-1].peak_rss_mb:.0f} MB"
            for name, runs in timed.items()), flush=True)
    return timed


def summarize(timed: dict[str, list[Timed]]) -> dict[str, Any]:
    """Medians per command; our ingests split where their progress lines appear."""
    return {name: median_of(runs, [breakdown(r) for r in runs] if _is_ingest(runs) else None)
            for name, runs in timed.items()}


def _is_ingest(runs: list[Timed]) -> bool:
    return any(_PARSED.search(line) for _, line in runs[0].lines)


def _commands(trace_dir: Path, ingests: list[Ingest], hta: bool, **options: Any) -> dict[str, Any]:
    commands: dict[str, Any] = {}
    if hta:
        commands["HTA"] = lambda: run_timed([sys.executable, "-c", HTA_LOAD, str(trace_dir)])
    for ingest in ingests:
        commands[ingest.name] = lambda ingest=ingest: ingest(trace_dir, **options)
    return commands


def cpu_of(timed: dict[str, list[Timed]]) -> float:
    return sum(t.cpu_s for runs in timed.values() for t in runs)


def hta_fits(trace_bytes: int | None) -> bool:
    """Whether HTA's load of a trace of ``trace_bytes`` (unknown: a small shared one) fits in the memory available
    now: it holds about :data:`HTA_MEMORY_FACTOR` times the trace."""
    if trace_bytes is None:
        return True
    with open("/proc/meminfo") as meminfo:
        available_kb = next(int(line.split()[1]) for line in meminfo if line.startswith("MemAvailable:"))
    return trace_bytes * HTA_MEMORY_FACTOR < available_kb * 1024


def bench_traces(folders: Mapping[str, tuple[Path, int | None]], rounds: int,
                 ingests: list[Ingest]) -> tuple[list[dict[str, Any]], float]:
    """Alternating rounds of HTA's load (where it fits in memory) and each ingest of each trace folder, with the
    trace's size where known; the medians and the CPU seconds."""
    rows, cpu = [], 0.0
    for label, (trace_dir, trace_bytes) in folders.items():
        hta = hta_fits(trace_bytes)
        if not hta:
            print(f"  {label}: HTA left out, it would need about {HTA_MEMORY_FACTOR}x the trace in memory", flush=True)
        timed = alternate(rounds, _commands(trace_dir, ingests, hta=hta), label)
        rows.append({"trace": label, "trace_bytes": trace_bytes, **summarize(timed)})
        cpu += cpu_of(timed)
    return rows, cpu


def bench_shared(rounds: int, ingests: list[Ingest]) -> tuple[list[dict[str, Any]], float]:
    """Each ingest of every shared trace (one run per folder), one run at a time and with ``--jobs 2``."""
    rows, cpu = [], 0.0
    for jobs in (1, 2):
        # exit 1 is expected: edge_cases is broken on purpose
        timed = alternate(rounds, _commands(SHARED_TRACES, ingests, hta=False, ok_codes=(0, 1), jobs=jobs),
                          f"shared traces --jobs {jobs}")
        rows.append({"trace": f"shared traces, --jobs {jobs}", **summarize(timed)})
        cpu += cpu_of(timed)
    return rows, cpu


def bench_floor(rounds: int, scratch: Path) -> tuple[list[dict[str, Any]], float]:
    """:mod:`bench.floor` (DuckDB, DuckLake's attach and one commit of as many tables as a run holds; nothing of
    tracelake) on a new lake and on one holding the tables already."""
    from pipelines.tables import RAW_TABLES
    from transforms.models import discover_models

    tables = str(len(RAW_TABLES) + sum(model.layer == "marts" for model in discover_models().values()))
    script = [user_python(), str(ROOT / "bench" / "floor.py")]
    new_lake, held = scratch / "floor-new", scratch / "floor-held"
    run_timed([*script, str(held), tables, "--fresh"])  # untimed: makes the tables
    timed = alternate(rounds, {"new lake": lambda: run_timed([*script, str(new_lake), tables, "--fresh"]),
                               "lake holding the tables": lambda: run_timed([*script, str(held), tables])}, "floor")
    return [{"trace": f"floor: no trace, one DuckLake commit of {tables} tables (bench/floor.py)", **summarize(timed)}], \
        cpu_of(timed)


def render(report: dict[str, Any]) -> str:
    """The figures as markdown, with ratios against HTA only when the machine was quiet."""
    quiet = report["quiet"]
    lines = [f"`{report['command']}`", "",
             f"load average before {report['load_before']:.2f}, after {report['load_after']:.2f}; other processes "
             f"used {report['others_cores']:.2f} cores on average" + ("" if quiet else
             " — the machine was busy: ratios not reported"), "",
             "| trace | command | wall s (median) | rounds | CPU s | CPU s per GB | peak RSS MB "
             "| to parsed / tables / rest s | speed vs HTA (wall, CPU) | memory vs HTA |",
             "|---|---|---:|---|---:|---:|---:|---|---|---:|"]
    for row in report["rows"]:
        hta = row.get("HTA")
        for name, m in row.items():
            if name in ("trace", "trace_bytes"):
                continue
            per_gb = f"{m['cpu_s'] / (row['trace_bytes'] / 1e9):.1f}" if row.get("trace_bytes") else ""
            split = f"{m['parsed_s']:.2f} / {m['tables_s']:.2f} / {m['after_s']:.2f}" if "parsed_s" in m else ""
            ratios = ("", "")
            if hta and name != "HTA" and quiet:
                ratios = (f"{hta['wall_s'] / m['wall_s']:.1f}x, {hta['cpu_s'] / m['cpu_s']:.1f}x",
                          f"{m['peak_rss_mb'] / hta['peak_rss_mb']:.2f}")
            lines.append(f"| {row['trace']} | {name} | {m['wall_s']:.2f} | {m['wall_s_rounds']} | {m['cpu_s']:.2f} "
                         f"| {per_gb} | {m['peak_rss_mb']:.0f} | {split} | {ratios[0]} | {ratios[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="the small shared traces against HTA")
    parser.add_argument("--sizes", default="", help="comma-separated sizes of made traces, e.g. 234MB,1GB")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (at least 3)")
    parser.add_argument("--shared", action="store_true", help="also time the ingest of the shared traces")
    parser.add_argument("--baseline", help="a commit of this repository to time beside this checkout")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the trace repeated to each size")
    parser.add_argument("--settle", type=float, default=180, help="seconds to wait for a quiet machine")
    args = parser.parse_args(argv)
    if args.rounds < 3:
        parser.error("--rounds: at least 3, for a median")

    OUT.mkdir(parents=True, exist_ok=True)
    sizes = [size for size in args.sizes.split(",") if size]
    # built before the quiet wait
    folders = {f"{size} (made)": (ensure_trace(size, args.source), parse_size(size)) for size in sizes}
    checkout = baseline_checkout(args.baseline) if args.baseline else None
    user_python()  # made before the quiet wait
    load_before = wait_for_quiet(args.settle)
    print(f"load average before: {load_before:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tracelake-bench-", dir=OUT) as scratch:
        ingests = [Ingest(Path(scratch), "tracelake ingest")]
        small_ingests = [*ingests, Ingest(Path(scratch), "tracelake ingest --no-record", options=("--no-record",))]
        if checkout:
            baseline = Ingest(Path(scratch), f"{args.baseline} ingest", checkout)
            ingests.append(baseline)
            small_ingests.append(baseline)
        for ingest in small_ingests:  # untimed: creates each Dagster home, warms the caches
            ingest(SHARED_TRACES / "simple_add")
        meter, ours_cpu = CpuMeter(), 0.0
        report: dict[str, Any] = {"command": "python bench/run.py " + " ".join(argv or sys.argv[1:]), "rows": []}
        if args.small:
            rows, cpu = bench_traces({f"{name} ({what})": (SHARED_TRACES / name, None) for name, what in SMALL.items()},
                                     args.rounds, small_ingests)
            report["rows"] += rows
            ours_cpu += cpu
            rows, cpu = bench_floor(args.rounds, Path(scratch))
            report["rows"] += rows
            ours_cpu += cpu
        rows, cpu = bench_traces(folders, args.rounds, ingests)
        report["rows"] += rows
        ours_cpu += cpu
        if args.shared:
            rows, cpu = bench_shared(args.rounds, ingests)
            report["rows"] += rows
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
