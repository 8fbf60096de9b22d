-- The wait each rank caused the others, per step, as wall time: over the collective instances it arrived last at
-- (each tied last arriver is credited), the time from the instance's first arrival to its last, and the union of
-- those intervals where instances overlap (concurrent process groups). Summing the other ranks' waits instead
-- counts each late microsecond once per waiting rank (378 ms caused in a 219 ms window). stragglers (per run) and
-- straggler_steps (per step) both read it, so the two say one thing by caused_wait_ns.
-- grain: run_id, rank, step
-- column: step: the step the instances were issued in (int_collective_arrivals; null outside every step)
-- column: caused_wait_ns: the union of its held-up intervals in the step
-- source: TraceLens NcclAnalyser wait_time (per instance: latest start - each rank's start)
with

held_up as (
    select
        run_id,
        rank,
        step,
        min(start_ns) over per_instance as first_arrival_ns,
        max(start_ns) over per_instance as last_arrival_ns,
        start_ns = max(start_ns) over per_instance as arrived_last
    from int_collective_arrivals
    where matched_ranks > 1
    window per_instance as (partition by run_id, backend, instance)
),

-- A new island starts past the furthest end before it, within the rank's step.
islands as (
    select
        run_id,
        rank,
        step,
        first_arrival_ns,
        last_arrival_ns,
        coalesce(first_arrival_ns > max(last_arrival_ns) over (
            partition by run_id, rank, step order by first_arrival_ns, last_arrival_ns
            rows between unbounded preceding and 1 preceding
        ), true) as starts_island
    from held_up
    where arrived_last and last_arrival_ns > first_arrival_ns
),

numbered as (
    select
        *,
        sum(starts_island::integer) over (
            partition by run_id, rank, step order by first_arrival_ns, last_arrival_ns rows unbounded preceding
        ) as island
    from islands
),

merged as (
    select run_id, rank, step, island, min(first_arrival_ns) as first_ns, max(last_arrival_ns) as last_ns
    from numbered
    group by run_id, rank, step, island
)

select run_id, rank, step, cast(sum(last_ns - first_ns) as bigint) as caused_wait_ns
from merged
group by run_id, rank, step
