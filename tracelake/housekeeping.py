"""``tracelake history``, ``maintain`` and ``migrate``: a lake's versions and its upkeep."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pipelines.lake.lake import ALIAS, Lake
from pipelines.lake.maintenance import maintain as maintain_lake
from pipelines.lake.migrate import migrate_manifests
from pipelines.settings import RETENTION
from tracelake.history import history_of
from tracelake.output import write_result
from tracelake.suggest import missing_runs_hint
from transforms.units import plural


def history(args: argparse.Namespace, options: dict[str, Any] | None) -> int:
    """Print the run's committed versions that the lake keeps, oldest first, and what it expired; exit 1 when the
    run is not in the lake."""
    with Lake(args.lake, options, args.catalog).connect(read_only=True) as con:
        found = history_of(con, args.run_id)
        hint = "" if found.versions else missing_runs_hint(con, [args.run_id],
                                                            f"select distinct run_id from {ALIAS}.raw.traces")
    if not found.versions:
        print(f"tracelake history: no version of run {args.run_id!r} in {args.lake}{hint}", file=sys.stderr)
        return 1
    rows = [(v.snapshot_id, v.committed_at, v.fingerprint, "marts only" if v.marts_only else "traces", v.source,
             "current; its snapshot record expired" if v.record_expired else
             ("current" if v is found.versions[-1] else "readable as of its snapshot"))
            for v in found.versions]
    write_result(["snapshot_id", "committed_at", "fingerprint", "rebuilt", "source", "version"], rows, args.format)
    if args.format == "table":
        print(f"The lake keeps {plural(found.snapshots_kept, 'snapshot')} of the {found.snapshots_made:,} it "
              f"committed: it expired {found.expired:,} past its retention ({RETENTION.name}, default {RETENTION.default}), and "
              f"with them any earlier version of {args.run_id} that only they read.")
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
