"""Raw Kineto JSON traces → typed, partitioned Parquet tables. No Dagster imports here."""

PARSER_VERSION = "1"
