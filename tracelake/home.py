"""The Dagster instance home that ``tracelake ingest`` records into and ``tracelake ui`` shows."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_HOME = Path("~/.tracelake/dagster").expanduser()


def dagster_home() -> Path:
    """``$DAGSTER_HOME`` when set, else ``~/.tracelake/dagster``, created and exported so Dagster finds it.

    One default for every command, so the runs an ingest records show in the UI without anything exported.
    """
    home = Path(os.environ.get("DAGSTER_HOME") or DEFAULT_HOME)
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if home == DEFAULT_HOME and not config.exists():  # ours: Dagster's defaults (SQLite in the home), quietly
        config.write_text("telemetry:\n  enabled: false\n")
    os.environ["DAGSTER_HOME"] = str(home)
    return home
