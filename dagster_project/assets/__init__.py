"""Raw (ingest) and mart (SQL) assets."""
