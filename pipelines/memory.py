"""How the ingest of one run shares its memory limit (``--memory-limit``, ``TRACELAKE_MEMORY_LIMIT``: the peak resident
memory of the process, whatever the trace's size) between what its steps hold. The steps run one after the other:

- every step: the interpreter, its imports and the allocators' slack (:data:`BASELINE_BYTES`);
- the parse: per trace parsed at once, DuckDB's buffer (it spills to disk beyond it) and the chunks in flight (the JSON
  reader holds a few times a chunk while it decodes one);
- the analysis tables: DuckDB's buffer (the models spill beyond it) and the Python functions' calls, which hold their
  inputs' Arrow and numpy copies and their results outside it (the runner hands a call as many rows as that share
  allows: ``transforms.runner.FunctionMemory``);
- the commit and the report: DuckDB's buffer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Measured on the bench traces: the process holds ~120 MB after its imports and ~250-300 MB between the steps (DuckDB's
# and pyarrow's allocators keep freed pages for a while, the lake's extensions are loaded).
BASELINE_BYTES = 320 << 20
# The parse's DuckDB buffer gains nothing beyond this (its tables' parts are written chunk by chunk and joined at the end).
PARSE_BUFFER_MAX_BYTES = 512 << 20
# Of what the baseline leaves, the analysis tables' DuckDB buffer and the functions' calls (the rest is slack: freed
# numpy and Arrow memory the allocator has not returned yet, DuckDB's allocations outside its buffer).
BUILD_BUFFER_SHARE = 0.5
FUNCTION_SHARE = 0.35
# What each DuckDB thread building the analysis tables holds beyond what spills: its operators' own state (hash
# tables' partitions, sort and window buffers), then per event of the run, as their state grows with the events it
# sees. Measured on made traces: 8.3 M events built on two threads within 221 MiB fail and on one pass; 33 M events
# within 555 MiB fail on two and pass on one (13-17 bytes an event); 850 k events within 126 MiB fail on two one build
# in six (in int_op_nodes or int_critical_path_graph) and pass on one six in six (~60 MiB a thread). A margin on top.
BUILD_BYTES_PER_THREAD = 64 << 20
BUILD_BYTES_PER_EVENT_PER_THREAD = 20
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def size_bytes(text: str) -> int:
    """``"1.5GB"`` (decimal units, as DuckDB reads them; ``GiB`` for binary ones) or a bare number of bytes, in bytes;
    anything else raises ValueError."""
    found = _SIZE.match(text)
    if not found or found.group(2).lower() not in _UNITS:
        raise ValueError(f"{text!r} is not a size such as 1.5GB, 800MB or 2GiB")
    return int(float(found.group(1)) * _UNITS[found.group(2).lower()])


@dataclass(frozen=True)
class MemoryShares:
    """The shares of one run's memory ``limit`` (as written, e.g. ``"1.5GB"``)."""

    limit: str

    @property
    def total_bytes(self) -> int:
        return size_bytes(self.limit)

    @property
    def usable_bytes(self) -> int:
        """What the baseline leaves (a quarter of a limit below it, which the steps then exceed: they fail out of
        memory, naming the setting)."""
        return max(self.total_bytes - BASELINE_BYTES, self.total_bytes // 4)

    def parse_buffer_bytes(self, traces_at_once: int, chunks_in_flight_bytes: int) -> int:
        """DuckDB's buffer for each of ``traces_at_once`` traces parsed at once, each with its chunks in flight."""
        share = self.usable_bytes // max(1, traces_at_once) - chunks_in_flight_bytes
        return max(16 << 20, min(PARSE_BUFFER_MAX_BYTES, share))

    @property
    def build_buffer_bytes(self) -> int:
        """DuckDB's buffer for the analysis tables, and for the commit and the report after them."""
        return int(self.usable_bytes * BUILD_BUFFER_SHARE)

    @property
    def function_bytes(self) -> int:
        """What one call of a Python function of the models may hold outside DuckDB's buffer."""
        return int(self.usable_bytes * FUNCTION_SHARE)

    def build_threads(self, events: int, cores: int) -> int:
        """DuckDB threads for the analysis tables of a run of ``events``: as many of ``cores`` as the buffer holds
        each thread's own state and share of the run for, at least one."""
        per_thread = BUILD_BYTES_PER_THREAD + events * BUILD_BYTES_PER_EVENT_PER_THREAD
        return max(1, min(cores, self.build_buffer_bytes // per_thread))

    def describe(self) -> str:
        """The setting, for errors that ask to raise it."""
        return f"a memory limit of {self.limit}: --memory-limit, TRACELAKE_MEMORY_LIMIT"
