-- One row per rank of a run that took part in collectives: how often it arrived last, the wait it caused the
-- other ranks, and a verdict. A collective instance is a row of `collectives` (NCCL kernels, or record_param_comms
-- host ops; matched across ranks by process group and seq) or a gloo:* host range of the CPU backend (gloo ops run
-- in issue order on every rank, so the k-th gloo:<op> of one rank is matched with the k-th of the others). Per
-- instance seen on two or more ranks, the rank(s) with the latest start arrived last; each other rank waited
-- latest start - its start (TraceLens' wait_time, total_wait_ns). The wait a rank caused is wall time: the time
-- from an instance's first arrival to its last, over the instances it arrived last at (each tied rank is credited),
-- their union where instances overlap (concurrent process groups), so it cannot exceed the collective span (an
-- audit, sql/checks); summing the other ranks' waits instead counted each late microsecond once per waiting rank
-- (378 ms caused in a 219 ms window). TraceLens' straggler summary reports times_arrived_last and the waits per
-- rank; HTA flags the ranks whose long communication kernels start latest within a step. Our verdict joins the two:
-- is_straggler when the rank caused at least half of all the wait in the run's collectives (caused_wait_ratio
-- >= 0.5), that wait is material (at least 5 % of the run's collective span: first collective start to last
-- collective end over all ranks), and no other rank arrived last as often (a tie, 4 of 8 against 4 of 8, is no
-- verdict). A balanced job has no straggler; a single-rank run has no row.
-- grain: run_id, rank
-- source: TraceLens NcclAnalyser straggler summary (times_arrived_last, wait_time); HTA 0.5.0
-- hta/analyzers/straggler.py (late-starting communication kernels); ANCHORS.md §2.3, §4
with

nccl_instances as (
    select
        run_id, rank, 'nccl:' || process_group || ':' || seq as instance, start_ns, end_ns,
        'nccl' as backend
    from collectives
),

gloo_ranges as (
    select
        run_id, rank, name, ts_ns as start_ns, end_ns,
        row_number() over (partition by run_id, rank, name order by ts_ns, end_ns) as order_in_rank
    from annotations
    where starts_with(name, 'gloo:') and not on_device
),

gloo_instances as (
    select run_id, rank, name || ':' || order_in_rank as instance, start_ns, end_ns, 'gloo' as backend
    from gloo_ranges
),

instances as (
    select * from nccl_instances
    union all
    select * from gloo_instances
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

-- Each instance's held-up interval, first arrival to last, for each rank that arrived last at it.
held_up as (
    select
        run_id,
        rank,
        min(start_ns) over per_instance as first_arrival_ns,
        max(start_ns) over per_instance as last_arrival_ns,
        arrived_last
    from arrivals
    where matched_ranks > 1
    window per_instance as (partition by run_id, instance)
),

-- The union of a rank's held-up intervals: a new island starts past the furthest end before it.
islands as (
    select
        run_id,
        rank,
        first_arrival_ns,
        last_arrival_ns,
        coalesce(first_arrival_ns > max(last_arrival_ns) over (
            partition by run_id, rank order by first_arrival_ns, last_arrival_ns
            rows between unbounded preceding and 1 preceding
        ), true) as starts_island
    from held_up
    where arrived_last and last_arrival_ns > first_arrival_ns
),

caused_by_rank as (
    select run_id, rank, sum(last_ns - first_ns) as caused_wait_ns
    from (
        select run_id, rank, island, min(first_arrival_ns) as first_ns, max(last_arrival_ns) as last_ns
        from (
            select
                *,
                sum(starts_island::integer) over (
                    partition by run_id, rank order by first_arrival_ns, last_arrival_ns rows unbounded preceding
                ) as island
            from islands
        )
        group by run_id, rank, island
    )
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
        -- the most often another rank of the run arrived last
        coalesce(max(arrived_last_count) over (
            partition by per_rank.run_id order by per_rank.rank rows between unbounded preceding and unbounded following
            exclude current row
        ), 0) as others_arrived_last_count,
        run_span.span_ns
    from per_rank
    join run_span using (run_id)
)

select
    run_id,
    rank,
    collectives,
    arrived_last_count,
    arrived_last_count / collectives as arrived_last_ratio,
    caused_wait_ns,
    coalesce(
        caused_wait_ratio >= 0.5 and caused_wait_ns >= 0.05 * span_ns and arrived_last_count > others_arrived_last_count,
        false
    ) as is_straggler,
    coalesce(caused_wait_ratio, 0) as caused_wait_ratio,
    arrived_first_count,
    total_wait_ns,
    total_wait_ns // collectives as mean_wait_ns,
    span_ns as collective_span_ns,
    backends
from shares
