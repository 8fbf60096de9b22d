-- One row per run: how many traces and ranks it holds, the job's shape, and when it ran.
-- grain: run_id
with

traces_ok as (
    select * from traces where status != 'failed'
),

device_names as (
    select
        run_id,
        mode(device_name) as device_name
    from devices
    group by run_id
),

summary as (
    select
        run_id,
        count(*) as trace_count,
        count(distinct rank) filter (where status != 'failed') as ranks,
        max(world_size) as world_size,
        mode(backend) as backend,
        min(window_start_ns) filter (where status != 'failed') as first_ts_ns,
        max(window_end_ns) filter (where status != 'failed') as last_ts_ns,
        max(ingested_at) as ingested_at,
        any_value(run_source_uri) as source_uri
    from traces
    group by run_id
)

select
    summary.run_id,
    summary.trace_count,
    summary.ranks,
    summary.world_size,
    summary.backend,
    device_names.device_name,
    summary.first_ts_ns,
    summary.last_ts_ns,
    summary.ingested_at,
    summary.source_uri
from summary
left join device_names using (run_id)
