"""``tracelake maintain`` keeps what ``TRACELAKE_RETENTION`` says (it used to expire every replaced version
whatever the variable said, its option defaulting to none), and the default (1 hour) keeps a version just replaced."""

from __future__ import annotations

import os
from pathlib import Path

from pipelines.lake.lake import Lake
from pipelines.lake.maintenance import run_history
from tests.cli.conftest import tracelake
from tests.support.torn_reads import RUN, ingest, make_sources


def _versions(lake: str) -> list[int]:
    with Lake(lake).connect(read_only=True) as con:
        return [version.snapshot_id for version in run_history(con, RUN)]


def test_maintain_honours_the_retention_variable(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    first, second = make_sources(tmp_path / "sources")
    ingest(first, lake, None)
    ingest(second, lake, None)
    replaced, current = _versions(lake)
    env = {k: v for k, v in os.environ.items() if k != "TRACELAKE_RETENTION"}

    kept = tracelake("maintain", "--lake", lake, env=env)  # the default: a version replaced a moment ago stays
    assert kept.code == 0, kept.stderr
    assert _versions(lake) == [replaced, current]

    expired = tracelake("maintain", "--lake", lake, env=env | {"TRACELAKE_RETENTION": "0 seconds"})
    assert expired.code == 0, expired.stderr
    assert replaced not in _versions(lake)  # (and any snapshot a newer one replaced, as the merge's)
    assert not list((Path(lake) / "_expired").rglob("*.parquet"))  # the replaced version's files are gone
