"""``tracelake history``, ``maintain`` and ``migrate``: a lake's versions and its upkeep."""

from __future__ import annotations

import argparse
from typing import Any

from pipelines.lake.lake import Lake
from pipelines.lake.maintenance import maintain as maintain_lake
from pipelines.lake.maintenance import run_history
from pipelines.lake.migrate import migrate_manifests
from pipelines.settings import RETENTION
from tracelake.output import write_result


def history(args: argparse.Namespace, options: dict[str, Any] | None) -> int:
    """Print the run's committed versions, oldest first; exit 1 when the lake records none."""
    with Lake(args.lake, options, args.catalog).connect(read_only=True) as con:
        versions = run_history(con, args.run_id)
    if not versions:
        print(f"tracelake history: no version of run {args.run_id!r} in {args.lake}")
        return 1
    rows = [(v.snapshot_id, v.committed_at, v.fingerprint, "marts only" if v.marts_only else "traces", v.source)
            for v in versions]
    write_result(["snapshot_id", "committed_at", "fingerprint", "rebuilt", "source"], rows, "table")
    return 0


def maintain(args: argparse.Namespace, options: dict[str, Any] | None) -> int:
    """Run one maintenance pass and say what it did."""
    report = maintain_lake(Lake(args.lake, options, args.catalog), retention=args.retention or RETENTION.text(),
                           leftover_age=args.leftover_age)
    print(f"merged {report.files_merged} groups of small files; deleted {report.orphans_deleted} orphaned data "
          f"files and {report.staging_swept} abandoned staged versions")
    if report.orphans_kept:
        print(f"kept {report.orphans_kept} data files that no snapshot names but that are older than the catalog: "
              "they belong to another catalog of this lake (a lost or replaced one), so they are not deleted")
    return 0


def migrate(args: argparse.Namespace, options: dict[str, Any] | None) -> int:
    """Convert a tracelake 0.1 lake in place."""
    runs = migrate_manifests(Lake(args.lake, options, args.catalog))
    print(f"converted {runs} runs of {args.lake} into a DuckLake")
    return 0
