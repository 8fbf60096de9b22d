"""The staging area: a run's new version waiting in the lake's storage (``LAKE/_staging/<run>/<version>/``) for its
commit. Parse steps put each trace's table files there (:mod:`pipelines.staging.trace`), the run's own tables and
its manifest follow (:mod:`pipelines.staging.run`); what crosses steps on other machines is JSON
(:mod:`pipelines.staging.manifest`). Nothing staged is visible to readers until the commit."""
