"""Progress lines for people watching ``tracelake ingest``; the command line prints this logger to stdout."""

import logging

progress_log = logging.getLogger("tracelake.progress")
