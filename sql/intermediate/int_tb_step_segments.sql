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

-- Slabs of time, a power of two wide per trace so that a slab holds about a million boundaries (the variable
-- step_segment_slab_points, which tests set small): each slab's lists are in memory at once, and slabs run in
-- parallel.
slab_widths as (
    select
        trace_no,
        min(t) as first_t,
        -- the span of time holding about that many boundaries on average, rounded up to a power of two
        ceil(log2(greatest(
            (max(t) - min(t)) / greatest(count(*) // coalesce(getvariable('step_segment_slab_points'), 1000000), 1), 2
        )))::int as slab_shift
    from boundaries
    group by trace_no
),

slabbed as (
    select boundaries.*, ((boundaries.t - slab_widths.first_t) >> slab_widths.slab_shift)::integer as slab
    from boundaries
    join slab_widths using (trace_no)
),

slab_sums as (
    select
        trace_no, slab, role, sum(delta)::integer as delta, max(step_start_ns) as step_start_ns, min(t) as first_t
    from slabbed
    group by trace_no, slab, role
),

-- a slab's last segment ends at the next slab's first time
slabs as (
    select
        trace_no, slab, min(first_t) as first_t,
        lead(min(first_t)) over (partition by trace_no order by slab) as next_slab_t
    from slab_sums
    group by trace_no, slab
),

-- What the slabs before leave open, per role, and the latest step start: boundaries at a slab's first time, so
-- each slab's running counts start from them.
carried as (
    select
        slabs.trace_no, slabs.slab, slabs.first_t as t, earlier.role, sum(earlier.delta)::integer as delta,
        max(earlier.step_start_ns) as step_start_ns
    from slabs
    join slab_sums as earlier
        on earlier.trace_no = slabs.trace_no
        and earlier.slab < slabs.slab
    group by all
),

slab_lists as (
    select
        trace_no, slab,
        list(t) as t,
        list(role::integer) as role,
        list(delta::integer) as delta,
        list(step_start_ns) as step_start_ns
    from (
        select trace_no, slab, t, role, delta, step_start_ns from slabbed
        union all
        select trace_no, slab, t, role, delta, step_start_ns from carried
    )
    group by trace_no, slab
),

-- The segments of each slab (transforms/step_segments.py): per distinct time, its end, the latest step start, the
-- top role and three flags.
segments as (
    select
        trace_no,
        tb_segments(slab_lists.t, slab_lists.role, slab_lists.delta, slab_lists.step_start_ns, slabs.next_slab_t)
            as segments
    from slab_lists
    join slabs using (trace_no, slab)
),

flat as (
    select
        trace_no,
        unnest(segments.seg_start_ns) as seg_start_ns,
        unnest(segments.seg_end_ns) as seg_end_ns,
        unnest(segments.step_start_ns) as step_start_ns,
        unnest(segments.top_role) as top_role,
        unnest(segments.kernel_active) as kernel_active,
        unnest(segments.comm_active) as comm_active,
        unnest(segments.cpu_active) as cpu_active
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
    segments.top_role,
    segments.kernel_active,
    segments.comm_active,
    segments.cpu_active
from flat as segments
join step_ranges
    on segments.trace_no = step_ranges.trace_no
    and segments.step_start_ns = step_ranges.start_ns
where segments.seg_end_ns <= step_ranges.end_ns
