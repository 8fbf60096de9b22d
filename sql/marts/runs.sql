-- One row per run: how many traces and ranks it holds, the job's shape, and when it ran.
-- grain: run_id
-- column: trace_count: trace files in the run
-- column: ranks: distinct ranks seen
-- column: world_size: the job's world size (distributedInfo)
-- column: backend: nccl, gloo, ... (distributedInfo)
-- column: device_name: the GPU model most traces name
-- column: first_ts_ns: the earliest event of the run
-- column: last_ts_ns: the latest event end of the run
-- column: ingested_at: when the run was last ingested
-- column: source_uri: the run's folder
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
