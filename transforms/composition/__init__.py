"""The composition: one run's ingest as named steps (stage each trace, stage the run, build the analysis tables,
commit the run, write its report), plain functions that ``tracelake ingest``, the Dagster assets and the tests all
call (:mod:`transforms.composition.steps`), and :func:`transforms.composition.ingest.ingest_run`, which runs them in
one process."""
