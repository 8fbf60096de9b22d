-- One row per elementary time segment inside a step of a trace: between two consecutive boundaries of any role
-- interval or step, so that inside it each role is either active or not. `top_role` is the role that owns the
-- segment in torch-tb-profiler's priority partition (0 Kernel > 1 Memcpy > 2 Memset > 3 Communication > 4 Runtime >
-- 5 DataLoader > 6 CPU Exec > 7 Other); the flags feed the computation/communication overlap.
-- grain: run_id, trace_id, seg_start_ns
-- source: torch-tb-profiler 0.4.3 overall_parser.py (Statistics.create_from_range, OverallParser.aggregate); ANCHORS.md §3.4
with

roles as materialized (
    select run_id, trace_id, role, start_ns, end_ns from int_tb_role_ranges where end_ns > start_ns
),

step_ranges as materialized (
    select * from int_steps
),

-- A step start carries its own time: the running max of it is the start of the step holding the segment (steps
-- are disjoint), which finds the step by an equi-join instead of an ASOF join that would sort every segment again.
boundaries as (
    select run_id, trace_id, start_ns as t, role, 1 as delta, null::bigint as step_start_ns from roles
    union all
    select run_id, trace_id, end_ns, role, -1, null from roles
    union all
    select run_id, trace_id, start_ns, -1, 0, start_ns from step_ranges
    union all
    select run_id, trace_id, end_ns, -1, 0, null from step_ranges
),

-- The seven per-role deltas travel packed in one HUGEINT, 18 bits per role (a trace never has 2^18 ranges of one
-- role open at once), so one running sum replaces seven: the sum of packed deltas is the packed open counts.
points as (
    select
        run_id, trace_id, t,
        sum(delta * (1::hugeint << (18 * greatest(role, 0)))) as d_packed,
        max(step_start_ns) as step_start_ns
    from boundaries
    group by run_id, trace_id, t
),

segments as (
    select
        run_id,
        trace_id,
        t as seg_start_ns,
        lead(t) over running as seg_end_ns,
        sum(d_packed) over running as open_packed,
        max(step_start_ns) over running as step_start_ns
    from points
    window running as (partition by run_id, trace_id order by t rows unbounded preceding)
),

flags as (
    select
        run_id, trace_id, seg_start_ns, seg_end_ns, step_start_ns,
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
    segments.run_id,
    segments.trace_id,
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
    on segments.run_id = step_ranges.run_id
    and segments.trace_id = step_ranges.trace_id
    and segments.step_start_ns = step_ranges.start_ns
where segments.seg_end_ns <= step_ranges.end_ns
