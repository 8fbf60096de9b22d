-- One row per boundary of a role interval (int_tb_role_ranges: it opens at its start, closes at its end) or of a
-- step (int_steps: its start and its end) of a trace with steps, in slabs of time, as tb_segments
-- (transforms/step_segments.py) reads them: int_tb_step_segments cuts each slab into segments, a batch of slabs at a
-- time. A slab is a power of two of ns wide per trace, so that it holds about a quarter of what one call of
-- tb_segments may (the variable tb_segments_rows, which the runner sets from the memory limit, or
-- step_segment_slab_points, which tests set small). Each slab also starts with what the slabs before it leave open
-- (per role, at its first time, with the latest step start) and knows the next slab's first time, where its last
-- segment ends.
-- A step start carries its own time: the running max of it is the start of the step holding a segment (steps are
-- disjoint), which finds the step by an equi-join instead of an ASOF join that would sort every segment again.
-- grain: piece, t, role, delta
-- source: torch-tb-profiler 0.4.3 overall_parser.py (Statistics.create_from_range, OverallParser.aggregate); ANCHORS.md §3.4
-- column: piece: the slab, numbered in time order, trace by trace
-- column: t: the boundary's time
-- column: role: the role the boundary opens or closes a range of (int_tb_role_ranges), -1 for a step's
-- column: delta: 1 opens a range, -1 closes one, 0 for a step; on a slab's first time, what the slabs before leave open
-- column: step_start_ns: a step start's own time (on a slab's first time, the latest before the slab), else null
-- column: next_t: the next slab's first time (null for a trace's last)
with

boundaries as (
    select run_id, trace_id, unnest([start_ns, end_ns]) as t, role, unnest([1, -1]) as delta, null::bigint as step_start_ns
    from int_tb_role_ranges
    semi join (select distinct run_id, trace_id from int_steps) using (run_id, trace_id)
    where end_ns > start_ns
    union all
    select run_id, trace_id, unnest([start_ns, end_ns]), -1, 0, unnest([start_ns, null])
    from int_steps
),

slab_widths as (
    select
        trace_id,
        min(t) as first_t,
        -- the span of time holding that many boundaries on average, rounded up to a power of two
        ceil(log2(greatest(
            (max(t) - min(t)) / greatest(count(*) // coalesce(
                getvariable('step_segment_slab_points'), getvariable('tb_segments_rows') // 4, 1000000
            ), 1),
            2
        )))::int as slab_shift
    from boundaries
    group by trace_id
),

slabbed as (
    select boundaries.*, ((boundaries.t - slab_widths.first_t) >> slab_widths.slab_shift)::integer as slab
    from boundaries
    join slab_widths using (trace_id)
),

slab_sums as (
    select trace_id, slab, role, sum(delta)::integer as delta, max(step_start_ns) as step_start_ns, min(t) as first_t
    from slabbed
    group by trace_id, slab, role
),

slabs as (
    select
        trace_id,
        slab,
        min(first_t) as first_t,
        lead(min(first_t)) over (partition by trace_id order by slab) as next_t,
        row_number() over (order by trace_id, slab) as piece
    from slab_sums
    group by trace_id, slab
),

-- What the slabs before each one leave open, per role that any of them has, and the latest step start: running
-- sums over the slabs' own sums (a slab without a role's boundaries adds nothing to it).
carried as (
    select
        slabs.piece,
        slabs.trace_id,
        slabs.first_t as t,
        roles.role,
        sum(slab_sums.delta) over earlier as delta,
        max(slab_sums.step_start_ns) over earlier as step_start_ns,
        count(slab_sums.role) over earlier as earlier_slabs,
        slabs.next_t
    from slabs
    join (select distinct trace_id, role from slab_sums) as roles using (trace_id)
    left join slab_sums using (trace_id, slab, role)
    window earlier as (
        partition by slabs.trace_id, roles.role order by slabs.slab rows between unbounded preceding and 1 preceding
    )
)

select slabs.piece, slabbed.trace_id, slabbed.t, slabbed.role, slabbed.delta, slabbed.step_start_ns, slabs.next_t
from slabbed
join slabs using (trace_id, slab)
union all
select piece, trace_id, t, role, delta::integer, step_start_ns, next_t
from carried
where earlier_slabs > 0
