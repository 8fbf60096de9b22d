"""How a run's memory limit is shared: the analysis tables get as many DuckDB threads as their buffer holds each
thread's own state and share of the run for (a thread's operators hold state growing with the events it sees)."""

from __future__ import annotations

from pipelines.memory import BUILD_BYTES_PER_EVENT_PER_THREAD, BUILD_BYTES_PER_THREAD, MemoryShares


def test_a_small_run_gets_every_core_and_a_large_one_fewer_down_to_one() -> None:
    shares = MemoryShares("1.5GB")
    buffer = shares.build_buffer_bytes
    assert shares.build_threads(40_000, cores=2) == 2  # nccl_rank0_of_2
    assert shares.build_threads(0, cores=16) == buffer // BUILD_BYTES_PER_THREAD < 16
    # The 2 GB and 8 GB made traces (8.3 M and 33 M events): two threads of 555 MiB failed on the second.
    assert shares.build_threads(8_300_000, cores=2) == 2
    assert shares.build_threads(33_000_000, cores=2) == 1
    fits = (buffer // 3 - BUILD_BYTES_PER_THREAD) // BUILD_BYTES_PER_EVENT_PER_THREAD
    assert shares.build_threads(fits, cores=16) == 3
    assert shares.build_threads(10**12, cores=16) == 1  # never none: one thread, spilling what it can


def test_a_lower_limit_gives_fewer_threads_to_the_same_run() -> None:
    events = 8_300_000
    assert MemoryShares("800MB").build_threads(events, cores=2) == 1  # 221 MiB: two threads failed, one passed
    # tests/perf/test_low_memory_ingest.py's 850 k events in 126 MiB: two threads failed one build in six
    assert MemoryShares("600MB").build_threads(850_000, cores=2) == 1
    assert MemoryShares("8GB").build_threads(events, cores=16) > MemoryShares("1.5GB").build_threads(events, cores=16)
