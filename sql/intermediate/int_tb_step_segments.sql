-- One row per elementary time segment inside a step of a trace: between two consecutive boundaries of any role
-- interval or step, so that inside it each role is either active or not. `top_role` is the role that owns the
-- segment in torch-tb-profiler's priority partition (0 Kernel > 1 Memcpy > 2 Memset > 3 Communication > 4 Runtime >
-- 5 DataLoader > 6 CPU Exec > 7 Other); the flags feed the computation/communication overlap.
-- grain: run_id, trace_id, seg_start_ns
-- source: torch-tb-profiler 0.4.3 overall_parser.py (Statistics.create_from_range, OverallParser.aggregate); ANCHORS.md §3.4
with

-- Only traces with steps have segments. They are numbered, so that grouping, partitioning and sorting carry no
-- strings.
traces as materialized (
    select run_id, trace_id, row_number() over (order by run_id, trace_id)::integer as trace_no
    from (select distinct run_id, trace_id from int_steps)
),

step_ranges as materialized (
    select traces.trace_no, int_steps.*
    from int_steps
    join traces using (run_id, trace_id)
),

-- A step start carries its own time: the running max of it is the start of the step holding the segment (steps
-- are disjoint), which finds the step by an equi-join instead of an ASOF join that would sort every segment again.
boundaries as (
    select
        traces.trace_no,
        unnest([roles.start_ns, roles.end_ns]) as t,
        roles.role,
        unnest([1, -1]) as delta,
        null::bigint as step_start_ns
    from int_tb_role_ranges as roles
    join traces using (run_id, trace_id)
    where roles.end_ns > roles.start_ns
    union all
    select trace_no, unnest([start_ns, end_ns]), -1, 0, unnest([start_ns, null])
    from step_ranges
),

-- The seven per-role deltas travel packed in one HUGEINT, 18 bits per role (a trace never has 2^18 ranges of one
-- role open at once), so one running sum replaces seven: the sum of packed deltas is the packed open counts.
points as (
    select
        trace_no, t,
        sum(delta * (1::hugeint << (18 * greatest(role, 0)))) as d_packed,
        max(step_start_ns) as step_start_ns
    from boundaries
    group by trace_no, t
),

-- A window over a whole trace is one partition, which DuckDB holds in memory at once. So the running sums run per
-- slab of time, a power of two wide per trace so that a slab holds about a million points (the variable
-- step_segment_slab_points, which tests set small): in parallel and within the memory limit, each slab starting
-- from the totals of the slabs before it.
slab_widths as (
    select
        trace_no,
        min(t) as first_t,
        -- the span of time holding about that many points on average, rounded up to a power of two
        ceil(log2(greatest(
            (max(t) - min(t)) / greatest(count(*) // coalesce(getvariable('step_segment_slab_points'), 1000000), 1), 2
        )))::int as slab_shift
    from points
    group by trace_no
),

slabbed as (
    select points.*, ((points.t - slab_widths.first_t) >> slab_widths.slab_shift)::integer as slab
    from points
    join slab_widths using (trace_no)
),

-- a slab's last segment ends at the next slab's first point
slabs as (
    select
        trace_no, slab,
        coalesce(sum(sum(d_packed)) over before, 0) as open_before,
        max(max(step_start_ns)) over before as step_start_before,
        lead(min(t)) over (partition by trace_no order by slab) as next_slab_t
    from slabbed
    group by trace_no, slab
    window before as (partition by trace_no order by slab rows between unbounded preceding and 1 preceding)
),

running as (
    select
        trace_no, slab, t,
        lead(t) over slab_so_far as next_t,
        sum(d_packed) over slab_so_far as open_in_slab,
        max(step_start_ns) over slab_so_far as step_start_in_slab
    from slabbed
    window slab_so_far as (partition by trace_no, slab order by t rows unbounded preceding)
),

segments as (
    select
        running.trace_no,
        running.t as seg_start_ns,
        coalesce(running.next_t, slabs.next_slab_t) as seg_end_ns,
        slabs.open_before + running.open_in_slab as open_packed,
        coalesce(running.step_start_in_slab, slabs.step_start_before) as step_start_ns
    from running
    join slabs using (trace_no, slab)
),

flags as (
    select
        trace_no, seg_start_ns, seg_end_ns, step_start_ns,
        ((open_packed >> 0) & 262143) > 0 as kernel_active,
        ((open_packed >> 18) & 262143) > 0 as memcpy_active,
        ((open_packed >> 36) & 262143) > 0 as memset_active,
        ((open_packed >> 54) & 262143) > 0 as comm_active,
        ((open_packed >> 72) & 262143) > 0 as runtime_active,
        ((open_packed >> 90) & 262143) > 0 as dataloader_active,
        ((open_packed >> 108) & 262143) > 0 as cpu_active
    from segments
)

select
    step_ranges.run_id,
    step_ranges.trace_id,
    step_ranges.rank,
    step_ranges.step,
    segments.seg_start_ns,
    segments.seg_end_ns,
    segments.seg_end_ns - segments.seg_start_ns as seg_ns,
    case
        when kernel_active then 0
        when memcpy_active then 1
        when memset_active then 2
        when comm_active then 3
        when runtime_active then 4
        when dataloader_active then 5
        when cpu_active then 6
        else 7
    end as top_role,
    segments.kernel_active,
    segments.comm_active,
    segments.cpu_active
from flags as segments
join step_ranges
    on segments.trace_no = step_ranges.trace_no
    and segments.step_start_ns = step_ranges.start_ns
where segments.seg_end_ns <= step_ranges.end_ns
