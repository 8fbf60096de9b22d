"""Dagster wiring: assets, resources, partitions, sensors, schedules and checks. Logic lives in pipelines/ and transforms/."""
