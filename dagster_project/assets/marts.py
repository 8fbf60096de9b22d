"""One asset per SQL mart, downstream of the raw tables (and marts) its SQL reads."""


import dagster as dg

from dagster_project.assets.raw import version_of
from dagster_project.metadata import check_outcomes, mart_metadata
from dagster_project.outbox import REGRESSION_CHECK as GATE
from dagster_project.outbox import RunRecord, regression_check
from dagster_project.partitions import trace_runs
from dagster_project.resources import IngestSettingsResource, LakeResource
from pipelines.staging.manifest import ManifestMissing, read_run_manifest
from pipelines.tables import RAW_TABLES
from transforms.checks import check_names
from transforms.composition.ingest import IngestSettings, rebuild_run
from transforms.composition.steps import CommittedRun, build_tables, commit_run
from transforms.graph import mart_dependencies
from transforms.models import default_sql_root, discover_models

SQL_ROOT = default_sql_root()
MODELS = discover_models(SQL_ROOT)
MARTS = sorted(name for name, model in MODELS.items() if model.layer == "marts")
# The regression gate on each new run, as `tracelake check RUN` evaluates it: a failed check in the UI.
REGRESSION_CHECK = dg.AssetCheckKey(dg.AssetKey(["marts", GATE[0]]), GATE[1])


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


def _commit(context: dg.AssetExecutionContext, lake: LakeResource, settings: IngestSettingsResource,
            selected: set[str]) -> CommittedRun:
    """After the raw tables' steps of the same Dagster run, build over what they staged and commit raw and analysis
    tables at once (a missing manifest fails the step); alone, build again over the committed raw tables."""
    handle, run_id = lake.lake(), context.partition_key
    selection = context.run.asset_selection  # None or empty: the whole job, raw tables included
    if not selection or any(key.path[0] == "raw" for key in selection):
        try:
            staged = read_run_manifest(handle, run_id, version_of(context))
        except ManifestMissing as exc:  # the step's failure says so itself, not a wrapped traceback
            raise dg.Failure(str(exc)) from exc
        return commit_run(handle, staged, build_tables(handle, staged, select=selected, settings=settings.build()))
    return rebuild_run(handle, run_id, select=selected, settings=IngestSettings(build=settings.build()))


@dg.multi_asset(
    specs=[_spec(name) for name in MARTS],
    check_specs=[
        dg.AssetCheckSpec(check, asset=dg.AssetKey(["marts", name]))
        for name in MARTS
        for check in check_names(MODELS[name], SQL_ROOT)
    ] + [dg.AssetCheckSpec(REGRESSION_CHECK.name, asset=REGRESSION_CHECK.asset_key,
                           description="no headline metric of the run got worse than its job's previous run by more "
                           "than 5 % and the two runs' step-to-step noise (run_regressions; tracelake check)")],
    partitions_def=trace_runs,
    can_subset=True,
    name="marts",
)
def marts(context: dg.AssetExecutionContext, lake: LakeResource, ingest_settings: IngestSettingsResource):  # type: ignore[no-untyped-def]  # Dagster reads a return annotation as the outputs' type
    """Build the selected SQL marts on DuckDB over the run's raw tables and commit them."""
    committed = _commit(context, lake, ingest_settings, {key.path[-1] for key in context.selected_asset_keys})
    if committed.built.failure:
        raise dg.Failure(f"{committed.built.failure} (the raw tables were committed, as snapshot "
                         f"{committed.commit.snapshot_id}, with the failure as a quality issue)")
    gated = REGRESSION_CHECK in context.selected_asset_check_keys and any(
        mart.name == REGRESSION_CHECK.asset_key.path[-1] for mart in committed.built.marts)
    record = RunRecord.of(committed, gate=regression_check(lake.lake(), context.partition_key) if gated else None)
    for key, metadata in mart_metadata(record).items():
        yield dg.MaterializeResult(asset_key=key, metadata=metadata)
    for check in check_outcomes(record):
        if dg.AssetCheckKey(check.asset_key, check.check_name) in context.selected_asset_check_keys:
            yield dg.AssetCheckResult(asset_key=check.asset_key, check_name=check.check_name, passed=check.passed,
                                      metadata=check.metadata, description=check.description)
