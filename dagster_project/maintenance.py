"""``maintain_lake``: the lake's upkeep as a job, on a schedule beside the sensor (``tracelake maintain`` by hand)."""

import dagster as dg

from dagster_project.resources import LakeResource
from pipelines.lake.maintenance import LEFTOVER_AGE, maintain
from pipelines.settings import MAINTAIN_CRON, RETENTION


class MaintenanceConfig(dg.Config):
    """How long older versions stay readable, and when staged or orphaned files count as a killed ingest's."""

    retention: str = RETENTION.text()
    leftover_age: str = LEFTOVER_AGE


@dg.op
def maintain_lake(context: dg.OpExecutionContext, config: MaintenanceConfig, lake: LakeResource) -> None:
    """Merge small files, expire old versions and delete what killed ingests left."""
    report = maintain(lake.lake(), retention=config.retention, leftover_age=config.leftover_age)
    context.log.info(
        f"merged {report.files_merged} groups of small files; deleted {report.orphans_deleted} orphaned data files "
        f"and {report.staging_swept} abandoned staged versions"
    )


@dg.job(description="Merge small files, expire old versions past the retention, delete killed ingests' files.")
def maintain_lake_job() -> None:
    maintain_lake()


maintain_lake_schedule = dg.ScheduleDefinition(
    job=maintain_lake_job,
    cron_schedule=MAINTAIN_CRON.text(),
    default_status=dg.DefaultScheduleStatus.STOPPED,
)
