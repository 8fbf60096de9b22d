-- One row per rank of a run that took part in collectives: how often it arrived last, the wait it caused the
-- other ranks, a verdict, and whether it is the culprit step after step. A collective instance is a row of
-- int_collective_arrivals (NCCL kernels or record_param_comms matched across ranks by process group and Seq, else
-- order; gloo collectives by process group, name and order). Per instance seen on two or more ranks, the rank(s)
-- with the latest start arrived last; each other rank waited latest start - its start (TraceLens' wait_time,
-- total_wait_ns). The wait a rank caused is wall time: the time from an instance's first arrival to its last, over
-- the instances it arrived last at (each tied rank is credited), their union where instances overlap (concurrent
-- process groups), so it cannot exceed the collective span (an audit, sql/checks); summing the other ranks' waits
-- instead counted each late microsecond once per waiting rank (378 ms caused in a 219 ms window). TraceLens'
-- straggler summary reports times_arrived_last and the waits per rank; HTA flags the ranks whose long
-- communication kernels start latest within a step. Our verdict joins the two: is_straggler when the rank caused
-- at least half of all the wait in the run's collectives (caused_wait_ratio >= 0.5), that wait is material (at
-- least 5 % of the run's collective span: first collective start to last collective end over all ranks), and no
-- other rank caused as much (a tie in the wait caused is no verdict; arriving last as often as another rank is
-- not a tie when one of them held the others up far longer). A balanced job has no straggler; a single-rank run
-- has no row.
-- Per step (straggler_steps): steps, culprit_steps and recurrence_ratio say whether the same rank holds the others
-- back step after step (a recurring straggler: recurrence_ratio >= 0.5 over 2 or more culprit steps) or the last
-- arriver moves (noise); cause is the cause straggler_steps gives most of its culprit steps (null on a tie or where
-- it is the culprit of none).
-- grain: run_id, rank
-- differs: HTA: a tie in the wait caused is no verdict, where HTA's top-k flags every tied rank; the last iteration counts (HTA leaves it out); and a culprit must have caused 5 % of the step or more, where HTA flags a rank in every iteration.
-- differs: TraceLens: the wait a rank caused is wall time (the union of the intervals it held the others up), where summing every waiting rank's wait counts each late microsecond once per waiting rank.
-- source: TraceLens NcclAnalyser straggler summary (times_arrived_last, wait_time); HTA 0.5.0
-- hta/analyzers/straggler.py (late-starting communication kernels); ANCHORS.md §2.3, §4
-- column: collectives: collective instances it took part in that were seen on two or more ranks
-- column: arrived_last_count: of those, where it started latest
-- column: arrived_last_ratio: arrived_last_count / collectives
-- column: caused_wait_ns: the other ranks' wait at the instances where it arrived last
-- column: is_straggler: caused at least half of the run's collective wait, and at least 5 % of the collective span
-- column: caused_wait_ratio: its share of the wait caused in the run
-- column: arrived_first_count: instances where it started first
-- column: total_wait_ns: its own wait, summed
-- column: mean_wait_ns: its own wait per instance
-- column: collective_span_ns: first collective start to last collective end over the run's ranks
-- column: backends: nccl, gloo or both
-- column: steps: steps where it took part in collectives matched across ranks (straggler_steps)
-- column: culprit_steps: of those, the steps whose waits are owed to it (straggler_steps.is_culprit)
-- column: recurrence_ratio: culprit_steps / steps
-- column: cause: the cause of most of its culprit steps: compute, data_loading, host or waiting_on_other_group
-- column: is_recurring: the culprit in 2 or more steps and in at least half of its steps
-- column: mean_culprit_late_ns: its late_ns per culprit step (how late it was, against the median arrival)
-- column: mean_culprit_extra_compute_ns: per culprit step, how much more it computed than the step's median rank
-- column: missed_collectives: collectives of its groups that other ranks ran and it did not (straggler_steps)
with

instances as (
    select run_id, rank, backend || ':' || instance as instance, start_ns, end_ns, backend
    from int_collective_arrivals
),

arrivals as (
    select
        *,
        count(*) over per_instance as matched_ranks,
        max(start_ns) over per_instance - start_ns as wait_ns,
        start_ns = max(start_ns) over per_instance as arrived_last,
        start_ns = min(start_ns) over per_instance as arrived_first
    from instances
    window per_instance as (partition by run_id, instance)
),

caused_by_rank as (
    select run_id, rank, sum(caused_wait_ns) as caused_wait_ns
    from int_caused_waits
    group by run_id, rank
),

per_rank as (
    select
        run_id,
        rank,
        count(*) as collectives,
        count(*) filter (where arrived_last) as arrived_last_count,
        count(*) filter (where arrived_first) as arrived_first_count,
        cast(coalesce(any_value(caused_by_rank.caused_wait_ns), 0) as bigint) as caused_wait_ns,
        cast(sum(wait_ns) as bigint) as total_wait_ns,
        string_agg(distinct backend, ',' order by backend) as backends
    from arrivals
    left join caused_by_rank using (run_id, rank)
    where matched_ranks > 1
    group by run_id, rank
),

run_span as (
    select run_id, max(end_ns) - min(start_ns) as span_ns
    from instances
    group by run_id
),

shares as (
    select
        per_rank.*,
        caused_wait_ns / nullif(sum(caused_wait_ns) over (partition by per_rank.run_id), 0) as caused_wait_ratio,
        -- the most wait another rank of the run caused
        coalesce(max(caused_wait_ns) over (
            partition by per_rank.run_id order by per_rank.rank rows between unbounded preceding and unbounded following
            exclude current row
        ), 0) as others_caused_wait_ns,
        run_span.span_ns
    from per_rank
    join run_span using (run_id)
),

per_step as (
    select
        run_id,
        rank,
        count(*) filter (where collectives > 0) as steps,
        count(*) filter (where is_culprit) as culprit_steps,
        avg(late_ns) filter (where is_culprit) as mean_culprit_late_ns,
        avg(extra_compute_ns) filter (where is_culprit) as mean_culprit_extra_compute_ns,
        sum(missed_collectives) as missed_collectives
    from straggler_steps
    group by run_id, rank
),

causes as (
    select run_id, rank, cause, count(*) as cause_steps
    from straggler_steps
    where is_culprit
    group by all
),

main_cause as (
    select run_id, rank, if(count(*) filter (where cause_steps = top) = 1, arg_max(cause, cause_steps), null) as cause
    from (select *, max(cause_steps) over (partition by run_id, rank) as top from causes)
    group by run_id, rank
)

select
    run_id,
    rank,
    collectives,
    arrived_last_count,
    arrived_last_count / collectives as arrived_last_ratio,
    caused_wait_ns,
    coalesce(
        caused_wait_ratio >= 0.5 and caused_wait_ns >= 0.05 * span_ns and caused_wait_ns > others_caused_wait_ns,
        false
    ) as is_straggler,
    coalesce(caused_wait_ratio, 0) as caused_wait_ratio,
    arrived_first_count,
    total_wait_ns,
    total_wait_ns // collectives as mean_wait_ns,
    span_ns as collective_span_ns,
    backends,
    coalesce(per_step.steps, 0) as steps,
    coalesce(per_step.culprit_steps, 0) as culprit_steps,
    per_step.culprit_steps / nullif(per_step.steps, 0) as recurrence_ratio,
    main_cause.cause,
    coalesce(per_step.culprit_steps >= 2 and per_step.culprit_steps * 2 >= per_step.steps, false) as is_recurring,
    per_step.mean_culprit_late_ns::bigint as mean_culprit_late_ns,
    per_step.mean_culprit_extra_compute_ns::bigint as mean_culprit_extra_compute_ns,
    coalesce(per_step.missed_collectives, 0)::bigint as missed_collectives
from shares
left join per_step using (run_id, rank)
left join main_cause using (run_id, rank)
