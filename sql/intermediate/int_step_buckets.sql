-- One row per bucket of time of a trace with ProfilerStep# ranges, to find the step whose stretch holds an instant
-- without joining every event with every step or sorting them all (an ASOF join): a stretch runs from a step's
-- start to the next step's (a step starting where another does takes the stretch, the greater step number first
-- as in (start, step) order), and an instant before the first start is in none. Buckets are a power of two of ns
-- wide per trace, about a step's width on average, from the first start to the last; an instant t is in bucket
-- (t - first_ns) >> shift (the last bucket for any later time), and its stretch is that of the last of the bucket's
-- starts_ns at or before t, else the stretch the bucket starts in:
--     k = len(list_filter(starts_ns, s -> s <= t)); stretch start = if(k > 0, starts_ns[k], before_ns), step alike.
-- Read by int_op_tree_ranges (where a thread's op trees may be cut) and int_critical_path_graph (each host event's
-- step).
-- grain: trace_id, bucket
-- column: first_ns: the trace's first step start, where bucket 0 starts
-- column: shift: a bucket is 2^shift ns wide
-- column: last_bucket: the trace's last bucket, which later instants fall in
-- column: starts_ns: the step starts inside the bucket, in time order
-- column: steps: their steps
-- column: before_ns: the start of the stretch the bucket starts in (null before the first step)
-- column: before_step: its step
with

starts as (
    select trace_id, ts_ns, max(step) as step
    from steps
    where ts_ns is not null
    group by trace_id, ts_ns
),

grids as (
    select
        trace_id,
        min(ts_ns) as first_ns,
        ceil(log2(greatest((max(ts_ns) - min(ts_ns)) // count(*), 2)))::integer as shift,
        max(ts_ns) as last_ns
    from starts
    group by trace_id
),

filled as (
    select
        grids.trace_id,
        (starts.ts_ns - grids.first_ns) >> grids.shift as bucket,
        list(starts.ts_ns order by starts.ts_ns) as starts_ns,
        list(starts.step order by starts.ts_ns) as steps
    from starts
    join grids using (trace_id)
    group by all
),

buckets as (
    select
        grids.trace_id,
        buckets.bucket,
        grids.first_ns,
        grids.shift,
        (grids.last_ns - grids.first_ns) >> grids.shift as last_bucket,
        coalesce(filled.starts_ns, []) as starts_ns,
        coalesce(filled.steps, []) as steps
    from grids
    cross join range(0, ((grids.last_ns - grids.first_ns) >> grids.shift) + 1) as buckets(bucket)
    left join filled
        on filled.trace_id = grids.trace_id
        and filled.bucket = buckets.bucket
)

select
    trace_id,
    bucket,
    first_ns,
    shift,
    last_bucket,
    starts_ns,
    steps,
    last_value(starts_ns[-1] ignore nulls) over earlier as before_ns,
    last_value(steps[-1] ignore nulls) over earlier as before_step
from buckets
window earlier as (partition by trace_id order by bucket rows between unbounded preceding and 1 preceding)
