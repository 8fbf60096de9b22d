-- One row per job and rank: over the job's last 10 runs (by started_ns; run_metrics gives each run's job and start),
-- in how many the rank took part in collectives (runs: it has a stragglers row) and in how many it was the
-- straggler (straggler_runs: stragglers.is_straggler), and the wait it caused the other ranks in them
-- (caused_wait_ns, summed). host: where the rank ran in the latest of those runs whose trace names one: the trace's
-- host_name (or hostname) key, top-level (kineto writes host_name on some builds) or inside distributedInfo, else the
-- host in the file name torch.profiler.tensorboard_trace_handler gives a trace by default,
-- <hostname>_<pid>.<ms>.pt.trace.json[.gz] (process labels name devices, "CPU" or "GPU 0", never the host).
-- is_repeat_straggler: the rank was the straggler in at least 2 and in more than half of the runs it took part in: the
-- slowness follows the rank (or its node), it is not noise. recommendation says so, with the host where known.
-- grain: job, rank
-- source: tracelake (issue 39); the per-run verdict is stragglers' (TraceLens straggler summary, HTA get_potential_stragglers)
-- column: job: the job (run_metrics.job: the runs' parent folder)
-- column: runs: of the job's last 10 runs, those in which the rank took part in collectives
-- column: straggler_runs: of those, the runs in which the rank was the straggler (stragglers.is_straggler)
-- column: caused_wait_ns: the wait the rank caused the other ranks over those runs (stragglers.caused_wait_ns, summed)
-- column: host: the host the rank ran on in the latest of those runs whose trace names it (null where none does)
-- column: last_run_id: the latest of those runs
-- column: is_repeat_straggler: the straggler in at least 2 and more than half of its runs
-- column: recommendation: what to look at, for a repeat straggler (null otherwise)
with

job_runs as (
    select distinct run_id, job, started_ns
    from run_metrics
),

recent_runs as (
    select run_id, job, started_ns
    from job_runs
    qualify row_number() over (partition by job order by started_ns desc, run_id desc) <= 10
),

trace_hosts as (
    select
        traces.run_id,
        traces.rank,
        coalesce(
            max(json_extract_string(meta.value_json, '$')) filter (where meta.key in ('host_name', 'hostname')),
            max(coalesce(json_extract_string(meta.value_json, '$.host_name'), json_extract_string(meta.value_json, '$.hostname')))
                filter (where meta.key = 'distributedInfo'),
            max(nullif(regexp_extract(traces.source_uri, '([^/]+)_\d+\.\d+\.pt\.trace\.json(\.gz)?$', 1), ''))
        ) as host
    from raw.traces as traces
    join recent_runs using (run_id)
    left join raw.trace_metadata as meta using (run_id, trace_id)
    group by traces.run_id, traces.rank
),

rank_runs as (
    select
        recent_runs.job,
        stragglers.rank,
        stragglers.run_id,
        recent_runs.started_ns,
        stragglers.is_straggler,
        stragglers.caused_wait_ns,
        trace_hosts.host
    from stragglers
    join recent_runs using (run_id)
    left join trace_hosts using (run_id, rank)
),

history as (
    select
        job,
        rank,
        count(*) as runs,
        count(*) filter (where is_straggler) as straggler_runs,
        sum(caused_wait_ns)::bigint as caused_wait_ns,
        arg_max(host, started_ns) filter (where host is not null) as host,
        arg_max(run_id, started_ns) as last_run_id
    from rank_runs
    group by job, rank
)

select
    job,
    rank,
    runs,
    straggler_runs,
    caused_wait_ns,
    host,
    last_run_id,
    straggler_runs >= 2 and straggler_runs * 2 > runs as is_repeat_straggler,
    if(
        straggler_runs >= 2 and straggler_runs * 2 > runs,
        'rank ' || rank || coalesce(' (host ' || host || ')', '') || ' was the straggler in ' || straggler_runs
        || ' of the job''s last ' || runs || ' runs: the slowness follows the rank, not noise. Compare its host with '
        || 'the others (clocks, thermal throttling, a slower link) and its share of the work (data, pipeline stage).',
        null
    ) as recommendation
from history
