-- One row per finding of the run $run_id: a recommendations rule, with the ranks it fires on, ranked by what it costs.
-- time_at_stake_ns is the time the finding puts at stake on its worst rank: the share of the trace's profiled step
-- time (step_breakdown.total_ns summed) that the rule's ratio measures (the idle share, 1 - value, for
-- low_gpu_utilization), the wait a straggler caused (stragglers.caused_wait_ns), the warm-up steps' time beyond the
-- trace's median step (step_health); null where the rule measures no time (memory_near_limit, DataParallel, DDP
-- without NCCL). Findings are ordered critical, warning, info, then by time at stake; message is the worst rank's.
-- grain: run_id, rule
-- source: tracelake (issue 47), over recommendations
-- column: severity: critical, warning or info (the rule's; its most severe where ranks differ)
-- column: severity_order: 0 critical, 1 warning, 2 info
-- column: ranks: the ranks the rule fires on, ascending
-- column: time_at_stake_ns: the time at stake on the worst rank (null: the rule measures no time)
-- column: message: the advice, as written for the worst rank
-- column: min_metric_value: the rule's metric over its ranks, lowest (and max_metric_value, highest)
with

profiled as (
    select run_id, trace_id, sum(total_ns) as profiled_ns
    from step_breakdown
    where run_id = $run_id
    group by all
),

warmup as (
    select run_id, trace_id, sum(total_ns - median_ns) filter (where is_warmup) as warmup_excess_ns
    from (
        select run_id, trace_id, total_ns, is_warmup, median(total_ns) over (partition by run_id, trace_id) as median_ns
        from step_health
        where run_id = $run_id
    )
    group by all
),

findings as (
    select
        recommendations.*,
        case lower(recommendations.severity)
            when 'critical' then 0 when 'high' then 0 when 'error' then 0
            when 'warning' then 1 when 'medium' then 1
            else 2
        end as severity_order,
        case
            when recommendations.rule = 'straggler' then stragglers.caused_wait_ns
            when recommendations.rule = 'warmup_steps' then greatest(warmup.warmup_excess_ns, 0)
            when recommendations.rule = 'low_gpu_utilization'
                then (1 - recommendations.metric_value) * profiled.profiled_ns
            when recommendations.metric like '%\_ratio' escape '\'
                and recommendations.rule not in ('memory_near_limit')
                then recommendations.metric_value * profiled.profiled_ns
        end::bigint as time_at_stake_ns
    from recommendations
    left join profiled using (run_id, trace_id)
    left join warmup using (run_id, trace_id)
    left join stragglers
        on stragglers.run_id = recommendations.run_id
        and stragglers.rank = recommendations.rank
    where recommendations.run_id = $run_id
)

select
    run_id,
    rule,
    min(severity_order) as severity_order,
    arg_min(severity, severity_order) as severity,
    list(distinct rank order by rank) filter (where rank is not null) as ranks,
    max(time_at_stake_ns) as time_at_stake_ns,
    arg_max(message, coalesce(time_at_stake_ns, 0)) as message,
    any_value(metric) as metric,
    min(metric_value) as min_metric_value,
    max(metric_value) as max_metric_value,
    any_value(source) as source
from findings
group by run_id, rule
order by severity_order, time_at_stake_ns desc nulls last, rule
