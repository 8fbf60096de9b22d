"""tracelake: PyTorch profiler traces → a Parquet lake with SQL analysis tables."""

from pipelines.lake.read import open_lake, open_lake_polars

__all__ = ["open_lake", "open_lake_polars"]
