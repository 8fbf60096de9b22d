"""The SQL model runner: ``sql/`` models on DuckDB over one run's raw Parquet. No Dagster imports."""
