"""The lake: a DuckLake catalog over Parquet files (:mod:`pipelines.lake.lake`), the one-transaction commit of a run
(:mod:`pipelines.lake.commit`), its readers (:mod:`pipelines.lake.read`, :mod:`pipelines.lake.run_scope`) and its
upkeep (:mod:`pipelines.lake.maintenance`, :mod:`pipelines.lake.migrate`)."""
