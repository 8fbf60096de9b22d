-- Run B against run A: per kernel, op, collective, step and step phase, the time per rank-step in each run
-- and how much it changed. Reads comparison_items(kind, name, run_id, dur_ns), built by transforms.compare
-- from the lake's views. Time is divided by the run's rank-steps (ProfilerStep ranges summed over ranks;
-- 1 when the run has none), so runs of different lengths and world sizes compare.
-- grain: kind, name
with

rank_steps as (
    select
        run_id,
        count(*) as rank_steps
    from steps
    where run_id in ($run_a, $run_b)
    group by run_id
),

by_run as (
    select
        items.kind,
        items.name,
        items.run_id,
        count(*) as calls,
        sum(items.dur_ns) as total_ns,
        sum(items.dur_ns) / coalesce(any_value(rank_steps.rank_steps), 1) as per_step_ns
    from comparison_items as items
    left join rank_steps using (run_id)
    where items.run_id in ($run_a, $run_b)
    group by all
),

pivoted as (
    select
        kind,
        name,
        cast(coalesce(sum(calls) filter (where run_id = $run_a), 0) as bigint) as calls_a,
        cast(coalesce(sum(calls) filter (where run_id = $run_b), 0) as bigint) as calls_b,
        cast(coalesce(sum(per_step_ns) filter (where run_id = $run_a), 0) as bigint) as per_step_a_ns,
        cast(coalesce(sum(per_step_ns) filter (where run_id = $run_b), 0) as bigint) as per_step_b_ns,
        cast(sum(total_ns) filter (where run_id = $run_a) / sum(calls) filter (where run_id = $run_a) as bigint)
            as mean_a_ns,
        cast(sum(total_ns) filter (where run_id = $run_b) / sum(calls) filter (where run_id = $run_b) as bigint)
            as mean_b_ns
    from by_run
    group by kind, name
)

select
    kind,
    name,
    calls_a,
    calls_b,
    per_step_a_ns,
    per_step_b_ns,
    per_step_b_ns - per_step_a_ns as delta_per_step_ns,
    round(100.0 * (per_step_b_ns - per_step_a_ns) / nullif(per_step_a_ns, 0), 1) as change_pct,
    mean_a_ns,
    mean_b_ns
from pivoted
order by delta_per_step_ns desc, kind, name
