"""One dynamic partition per run, shared by every raw and mart asset."""

from __future__ import annotations

import dagster as dg

TRACE_RUNS = "trace_runs"
trace_runs = dg.DynamicPartitionsDefinition(name=TRACE_RUNS)
