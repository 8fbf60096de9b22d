"""One dynamic partition per run, shared by every raw and mart asset."""

from __future__ import annotations

import dagster as dg

trace_runs = dg.DynamicPartitionsDefinition(name="trace_runs")
