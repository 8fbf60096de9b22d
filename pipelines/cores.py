"""How many cores this process may use."""

from __future__ import annotations

import functools
import os

import duckdb

from pipelines.rows import one


@functools.cache
def available_cores() -> int:
    """The cores this process may run on: its CPU affinity, and a container's CPU quota as DuckDB reads it (from the
    cgroup), both of which ``os.cpu_count()`` ignores: a parse on a 4-CPU pod of a 64-core node would otherwise
    start 64 chunk tasks at once."""
    with duckdb.connect() as con:
        (quota,) = one(con.execute("select current_setting('threads')"))
    pinned = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else int(quota)  # Linux only
    return max(1, min(int(quota), pinned))


def core_share(parallelism: int) -> int:
    """The cores each of ``parallelism`` steps running at once on this machine gets (at least one)."""
    return max(1, available_cores() // max(1, parallelism))
