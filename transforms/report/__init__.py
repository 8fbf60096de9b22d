"""The report: a run's page and the fleet view rendered from the lake's tables (:mod:`transforms.report.pages`),
their charts (:mod:`transforms.report.charts`), and where the pages are written (:mod:`transforms.report.files`)."""
