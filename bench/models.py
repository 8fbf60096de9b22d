"""Profile one ingest in this process: the parse, the analysis tables model by model, and the commit.

Each model's wall and CPU seconds (the CPU of the thread that builds it: DuckDB runs a model's statement on the
calling thread when the models share the cores one thread each) and the process's peak RSS while it ran, so that the
parts that grow faster than the trace show themselves when two sizes are compared:

    python bench/models.py bench/out/traces/1GB bench/out/traces/2GB [--memory-limit 1.5GB] [--top 15]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipelines.lake.lake import Lake  # noqa: E402
from pipelines.sources import discover_runs  # noqa: E402
from transforms import runner  # noqa: E402

_PAGE = os.sysconf("SC_PAGE_SIZE")
_CREATE = runner._create
_PACK = runner.pack_pieces
_CURRENT = threading.local()


def rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * _PAGE / 2**20


@dataclass
class ModelTime:
    name: str
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    attempts: int = 0
    batches: str = ""
    """For a model built in pieces: its batches and the rows a batch may hold."""


@dataclass
class Profile:
    models: dict[str, ModelTime] = field(default_factory=dict)
    running: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    peak_rss_mb: float = 0.0
    phase: str = "parse"
    phases: dict[str, list[float]] = field(default_factory=dict)
    """Phase -> [wall s, CPU s, peak RSS MB]."""

    def sample(self, stop: threading.Event) -> None:
        """Every 20 ms: the process's RSS, charged to each model running."""
        while not stop.wait(0.02):
            rss = rss_mb()
            with self.lock:
                self.peak_rss_mb = max(self.peak_rss_mb, rss)
                entry = self.phases.setdefault(self.phase, [0.0, 0.0, 0.0])
                entry[2] = max(entry[2], rss)
                for name in self.running:
                    self.models[name].peak_rss_mb = max(self.models[name].peak_rss_mb, rss)


def instrument(profile: Profile) -> None:
    """Wrap :func:`transforms.runner._create` to time each model."""
    create = _CREATE

    def packed(pieces, rows, max_rows):  # type: ignore[no-untyped-def]
        batches = _PACK(pieces, rows, max_rows)
        profile.models[_CURRENT.model].batches = f"{len(batches)} x <= {max_rows:,} rows ({int(rows.sum()):,})"
        return batches

    runner.pack_pieces = packed

    def timed(con, model, *args):  # type: ignore[no-untyped-def]
        _CURRENT.model = model.name
        with profile.lock:
            entry = profile.models.setdefault(model.name, ModelTime(model.name))
            entry.attempts += 1
            profile.running.add(model.name)
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return create(con, model, *args)
        finally:
            with profile.lock:
                entry.wall_s += time.perf_counter() - wall
                entry.cpu_s += time.thread_time() - cpu
                profile.running.discard(model.name)

    runner._create = timed


def _process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def phased(profile: Profile, name: str, step):  # type: ignore[no-untyped-def]
    """``step`` (a composition step) timed as phase ``name``; the phase after it is ``commit`` or ``report``."""

    def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
        wall, cpu = time.perf_counter(), _process_cpu_s()
        with profile.lock:
            profile.phase = name
        try:
            return step(*args, **kwargs)
        finally:
            with profile.lock:
                entry = profile.phases.setdefault(name, [0.0, 0.0, 0.0])
                entry[0] += time.perf_counter() - wall
                entry[1] += _process_cpu_s() - cpu
                profile.phase = "after"

    return timed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="trace folders (one run each)")
    parser.add_argument("--memory-limit", help="TRACELAKE_MEMORY_LIMIT for the ingest")
    parser.add_argument("--top", type=int, default=15, help="models shown, by CPU")
    args = parser.parse_args(argv)
    if args.memory_limit:
        os.environ["TRACELAKE_MEMORY_LIMIT"] = args.memory_limit
    from transforms.composition import ingest

    steps = {"parse": ingest.stage_traces, "build": ingest.build_tables, "commit": ingest.commit_run}

    for folder in args.folders:
        profile = Profile()
        instrument(profile)
        ingest.stage_traces, ingest.build_tables, ingest.commit_run = (
            phased(profile, name, step) for name, step in steps.items())
        stop = threading.Event()
        sampler = threading.Thread(target=profile.sample, args=(stop,), daemon=True)
        sampler.start()
        cpu0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="tracelake-profile-", dir=ROOT / "bench" / "out") as lake_dir:
            (run,) = discover_runs(str(folder))
            ingest.ingest_run(run, Lake(lake_dir), settings=ingest.IngestSettings(report=False))
        stop.set()
        sampler.join()
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
        print(f"\n{folder}: wall {time.perf_counter() - wall0:.1f} s, CPU {cpu:.1f} s, peak RSS "
              f"{profile.peak_rss_mb:.0f} MB (sampled), models {sum(m.cpu_s for m in profile.models.values()):.1f}"
              " CPU-s", flush=True)
        for name, (wall, cpu_s, peak) in profile.phases.items():
            print(f"  {name}: wall {wall:.1f} s, CPU {cpu_s:.1f} s, peak RSS {peak:.0f} MB")
        print(f"{'model':32} {'wall s':>8} {'CPU s':>8} {'peak MB':>8} builds")
        for m in sorted(profile.models.values(), key=lambda m: -m.cpu_s)[: args.top]:
            print(f"{m.name:32} {m.wall_s:8.2f} {m.cpu_s:8.2f} {m.peak_rss_mb:8.0f} {m.attempts} {m.batches}")
        runner._create, runner.pack_pieces = _CREATE, _PACK
        ingest.stage_traces, ingest.build_tables, ingest.commit_run = steps.values()


if __name__ == "__main__":
    main()
