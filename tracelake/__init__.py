"""tracelake: PyTorch profiler traces → a Parquet lake with SQL analysis tables."""

from transforms.catalog import open_lake

__all__ = ["open_lake"]
