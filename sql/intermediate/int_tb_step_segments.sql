-- One row per elementary time segment inside a step of a trace: between two consecutive boundaries of any role
-- interval or step, so that inside it each role is either active or not. `top_role` is the role that owns the
-- segment in torch-tb-profiler's priority partition (0 Kernel > 1 Memcpy > 2 Memset > 3 Communication > 4 Runtime >
-- 5 DataLoader > 6 CPU Exec > 7 Other); the flags feed the computation/communication overlap.
-- grain: run_id, trace_id, seg_start_ns
-- pieces: int_tb_step_boundaries
-- piece_name: format('the time of trace {} from {} ns to {} ns', any_value(trace_id), min(t), max(t))
-- source: torch-tb-profiler 0.4.3 overall_parser.py (Statistics.create_from_range, OverallParser.aggregate); ANCHORS.md §3.4
with

-- Traces and steps numbered, so that the segments find their step by integers.
traces as (
    select trace_id, row_number() over (order by trace_id) as trace_no
    from (select distinct trace_id from int_steps)
),

steps as (
    select int_steps.*, traces.trace_no
    from int_steps
    join traces using (trace_id)
),

-- The segments of each slab of this batch (int_tb_step_boundaries; transforms/step_segments.py): per distinct time,
-- its end, the latest step start, the top role and three flags.
segments as (
    select traces.trace_no, slabs.segments
    from (
        select
            piece,
            trace_id,
            tb_segments(list(t), list(role), list(delta), list(step_start_ns), any_value(next_t)) as segments
        from int_tb_step_boundaries
        -- the batch the runner builds (every piece where nothing sets it)
        where piece between coalesce(getvariable('first_piece'), 0)
            and coalesce(getvariable('last_piece'), 9223372036854775807)
        group by piece, trace_id
    ) as slabs
    join traces using (trace_id)
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
    steps.run_id,
    steps.trace_id,
    steps.rank,
    steps.step,
    segments.seg_start_ns,
    segments.seg_end_ns,
    segments.seg_end_ns - segments.seg_start_ns as seg_ns,
    segments.top_role,
    segments.kernel_active,
    segments.comm_active,
    segments.cpu_active
from flat as segments
join steps
    on segments.trace_no = steps.trace_no
    and segments.step_start_ns = steps.start_ns
where segments.seg_end_ns <= steps.end_ns
