"""One asset per SQL mart, downstream of the raw tables (and marts) its SQL reads."""

import time

import dagster as dg

from dagster_project.partitions import trace_runs
from dagster_project.progress import progress_log
from dagster_project.resources import IngestSettingsResource, LakeResource
from pipelines.ingest import load_staged_run
from pipelines.tables import RAW_TABLES
from transforms.checks import check_names
from transforms.graph import mart_dependencies
from transforms.models import default_sql_root, discover_models
from transforms.pipeline import commit_staged_run, rebuild_marts
from transforms.report_files import start_run_report
from transforms.runner import MartResult

SQL_ROOT = default_sql_root()
MODELS = discover_models(SQL_ROOT)
MARTS = sorted(name for name, model in MODELS.items() if model.layer == "marts")


def _spec(name: str) -> dg.AssetSpec:
    model = MODELS[name]
    raw, marts = mart_dependencies(MODELS, name, set(RAW_TABLES))
    return dg.AssetSpec(
        key=["marts", name],
        deps=[dg.AssetKey(["raw", t]) for t in sorted(raw)] + [dg.AssetKey(["marts", m]) for m in sorted(marts)],
        description=f"{model.description}\n\nGrain: {', '.join(model.grain)}. Definition: {model.source or 'tracelake'}.",
        group_name="marts",
        kinds={"duckdb", "parquet"},
        metadata={"sql": dg.MetadataValue.md(f"```sql\n{model.sql}\n```"), "grain": ", ".join(model.grain)},
    )


def _preview(result: MartResult) -> str:
    header = "| " + " | ".join(result.columns) + " |\n|" + "---|" * len(result.columns) + "\n"
    return header + "".join("| " + " | ".join(str(v) for v in row) + " |\n" for row in result.preview)


@dg.multi_asset(
    specs=[_spec(name) for name in MARTS],
    check_specs=[
        dg.AssetCheckSpec(check, asset=dg.AssetKey(["marts", name]))
        for name in MARTS
        for check in check_names(MODELS[name], SQL_ROOT)
    ],
    partitions_def=trace_runs,
    can_subset=True,
    name="marts",
)
def marts(context: dg.AssetExecutionContext, lake: LakeResource, ingest_settings: IngestSettingsResource):
    """Build the selected SQL marts on DuckDB over the run's raw tables and commit them.

    After the raw tables' steps of the same Dagster run, the marts are built over what they staged and
    one transaction commits raw tables and marts; alone, they are built again over the committed raw tables.
    """
    selected = {key.path[-1] for key in context.selected_asset_keys}
    handle = lake.lake()
    run_id = context.partition_key
    # The models of a GB-sized trace take tens of seconds: say so before, and how long after.
    progress_log.info("  %s: building %d analysis tables", run_id, len(selected))
    started = time.perf_counter()
    staged = load_staged_run(handle, run_id, context.run.root_run_id or context.run.run_id)
    settings = ingest_settings.mart_settings()
    if staged is not None:
        committed = commit_staged_run(handle, staged, select=selected, settings=settings)
    else:
        committed = rebuild_marts(handle, run_id, select=selected, settings=settings)
    if ingest_settings.report_ahead:
        start_run_report(handle, run_id)
    progress_log.info(
        "  %s: %d analysis tables in %.1f s, committed as snapshot %d",
        run_id, len(committed.marts), time.perf_counter() - started, committed.commit.snapshot_id,
    )
    for result in committed.marts:
        key = dg.AssetKey(["marts", result.name])
        yield dg.MaterializeResult(
            asset_key=key,
            metadata={
                "dagster/row_count": result.row_count,
                "snapshot": committed.commit.snapshot_id,
                "preview": dg.MetadataValue.md(_preview(result)),
            },
        )
        for check in result.checks:
            if dg.AssetCheckKey(key, check.name) in context.selected_asset_check_keys:
                yield dg.AssetCheckResult(
                    asset_key=key,
                    check_name=check.name,
                    passed=check.passed,
                    metadata={"failing_rows": check.failures, "sample": str(check.sample[:3])},
                    description=check.description,
                )
