-- One row per step of a trace. With ProfilerStep#N (step_rule 'profiler_step'), as torch-tb-profiler 0.4.3 keeps
-- them: the host ranges, moved to the device side when runtime events launched device work (start = max(previous
-- step end, host start), end = max(host end, last end of the device ops launched by runtimes lying fully inside the
-- host step)), with trailing steps that launched nothing dropped, and the last step dropped when it launched < 80 %
-- of the previous step's device ops. Runtime here means the legacy `Runtime` category only, as in 0.4.3 (so modern
-- traces keep their host ranges, as tb_plugin's figures do).
-- Deliberate difference: without ProfilerStep#N, tb_plugin keeps one step, the host ops' span, and device work queued
-- past it (an inference server's, a graph replay's) falls outside: a saturated GPU read 0 % busy. Here the steps
-- are found from the trace, the first rule that applies naming them (step_rule):
--   'annotation': a host user annotation at the top of its thread (inside no other op or annotation) whose name
--     repeats (record_function("forward") around each pass; the name with the most time when several repeat; not
--     a collective's nccl:/gloo:/hccl: range nor the DataLoader's enumerate(DataLoader)#..., parts of a pass): a
--     step from each one's start to the next one's start, the last to its own end;
--   'graph_launch': two or more CUDA/HIP graph launches (cudaGraphLaunch, hipGraphLaunch), none of the top-level
--     annotations holding two of them (a piecewise graph launches its pieces inside one pass): a step from each
--     launch to the next, the last to the launch's end;
--   'whole_trace': one step 0 = [min, max] of the host Operator (and legacy `Python`) events, or (GPU-only: runtime
--     calls and kernels, as a profiler that records no CPU ops writes it) of its runtime calls and device activity,
--     where tb_plugin keeps its empty sentinel step [sys.maxsize, -sys.maxsize - 1] and no utilization.
-- These steps, numbered from 0 in time order, are moved to the device side by the same rule over every runtime call
-- that launched device work (cuda_runtime and cuda_driver as well as `Runtime`), so a step covers the device work its
-- launches queued; none is pruned (the last pass of a loop is a whole one, unlike the last ProfilerStep).
-- Deliberate difference: the steps are the host's ProfilerStep#N ranges only (the raw steps table). Recent PyTorch
-- also writes a gpu_user_annotation ProfilerStep#N on the GPU timeline, which tb_plugin takes as a second step of
-- that number (a range of a few µs after the step: step names repeat, and its per-step views mix the two).
-- grain: run_id, trace_id, step
-- source: torch-tb-profiler 0.4.3 event_parser.py StepParser (parse_steps, _find_device_steps, _update_steps_duration); ANCHORS.md §3.3
-- column: step: the ProfilerStep number, else the found step's index from 0 in time order
-- column: step_rule: the rule that found the step: profiler_step, annotation, graph_launch or whole_trace
-- column: step_idx: the step's position in its trace, from 1
-- column: start_ns: the step's start on the device side (its host start where no device work was matched)
-- column: end_ns: the step's end on the device side: its host end, or the end of the device work it launched if later
-- column: host_start_ns: the step's host range start
-- column: host_end_ns: the step's host range end
-- column: device_ops: device activities (kernels, memcpy, memset) launched from inside the host range
-- column: uses_device: whether the trace's steps were moved to the device side
with

profiler_steps as (
    select run_id, trace_id, rank, step, event_idx, ts_ns as host_start_ns, end_ns as host_end_ns
    from steps
),

host_events as (
    select run_id, trace_id, rank, ts_ns, end_ns from cpu_ops
    union all
    select run_id, trace_id, rank, ts_ns, end_ns from python_functions where lower(cat) = 'python'
),

-- a trace's timed events: host ones first, else (GPU-only) its runtime calls and device activity
timed_events as (
    select run_id, trace_id, rank, ts_ns, end_ns, true as is_host from host_events
    union all
    select run_id, trace_id, rank, ts_ns, end_ns, false from runtime_calls
    union all
    select run_id, trace_id, rank, ts_ns, end_ns, false from kernels
    union all
    select run_id, trace_id, rank, ts_ns, end_ns, false from gpu_memcpy
    union all
    select run_id, trace_id, rank, ts_ns, end_ns, false from gpu_memset
),

whole_trace_step as (
    select
        run_id,
        trace_id,
        any_value(rank) as rank,
        0::bigint as step,
        coalesce(min(ts_ns) filter (where is_host), min(ts_ns)) as host_start_ns,
        coalesce(max(end_ns) filter (where is_host), max(end_ns)) as host_end_ns
    from timed_events
    anti join profiler_steps using (run_id, trace_id)
    group by run_id, trace_id
),

-- The host ranges of the traces without ProfilerStep, by thread, an enclosing range before the ranges it holds.
unstepped_ranges as (
    select run_id, trace_id, rank, pid, tid, ts_ns, end_ns, name, true as is_annotation
    from annotations
    anti join profiler_steps using (run_id, trace_id)
    where not coalesce(on_device, false)
    union all
    select run_id, trace_id, rank, pid, tid, ts_ns, end_ns, name, false
    from cpu_ops
    anti join profiler_steps using (run_id, trace_id)
),

-- An annotation at the top of its thread: no range before it on the thread reaches past its start.
top_annotations as (
    select run_id, trace_id, rank, name, ts_ns, end_ns
    from (
        select
            *,
            max(end_ns) over (
                partition by run_id, trace_id, pid, tid order by ts_ns, end_ns desc
                rows between unbounded preceding and 1 preceding
            ) as reach_before_ns
        from unstepped_ranges
    )
    where is_annotation and (reach_before_ns is null or reach_before_ns <= ts_ns)
),

-- The repeated annotations that are parts of an iteration, not iterations: collectives and the DataLoader's next.
loop_candidates as (
    select *
    from top_annotations
    where not regexp_matches(name, '^(nccl|gloo|hccl):|^enumerate\(DataLoader\)')
),

-- The repeated name of each trace that holds the most time.
loop_names as (
    select run_id, trace_id, arg_max(name, total_ns) as name
    from (
        select run_id, trace_id, name, sum(end_ns - ts_ns) as total_ns
        from loop_candidates
        group by all
        having count(*) >= 2
    )
    group by all
),

annotation_steps as (
    select
        run_id,
        trace_id,
        rank,
        ts_ns as host_start_ns,
        coalesce(lead(ts_ns) over (partition by run_id, trace_id order by ts_ns, end_ns), end_ns) as host_end_ns
    from loop_candidates
    semi join loop_names using (run_id, trace_id, name)
),

graph_launches as (
    select run_id, trace_id, rank, ts_ns, end_ns
    from runtime_calls
    anti join profiler_steps using (run_id, trace_id)
    anti join loop_names using (run_id, trace_id)
    where regexp_matches(name, '^(cuda|hip)GraphLaunch')
),

-- Traces where a top-level annotation holds several graph launches: those are pieces of one pass.
piecewise_graphs as (
    select distinct top_annotations.run_id, top_annotations.trace_id
    from top_annotations
    join graph_launches
        on graph_launches.run_id = top_annotations.run_id
        and graph_launches.trace_id = top_annotations.trace_id
        and graph_launches.ts_ns >= top_annotations.ts_ns
        and graph_launches.end_ns <= top_annotations.end_ns
    group by top_annotations.run_id, top_annotations.trace_id, top_annotations.ts_ns, top_annotations.end_ns
    having count(*) >= 2
),

graph_steps as (
    select
        run_id,
        trace_id,
        rank,
        ts_ns as host_start_ns,
        coalesce(lead(ts_ns) over (partition by run_id, trace_id order by ts_ns, end_ns), end_ns) as host_end_ns
    from graph_launches
    anti join piecewise_graphs using (run_id, trace_id)
    semi join (select run_id, trace_id from graph_launches group by all having count(*) >= 2) using (run_id, trace_id)
),

found_steps as (
    select *, 'annotation' as step_rule from annotation_steps
    union all
    select *, 'graph_launch' from graph_steps
),

host_steps as (
    select run_id, trace_id, rank, step, event_idx, host_start_ns, host_end_ns, 'profiler_step' as step_rule
    from profiler_steps
    union all
    select
        run_id,
        trace_id,
        rank,
        row_number() over (partition by run_id, trace_id order by host_start_ns, host_end_ns) - 1,
        null,
        host_start_ns,
        greatest(host_end_ns, host_start_ns),
        step_rule
    from found_steps
    union all
    select run_id, trace_id, rank, step, null, host_start_ns, host_end_ns, 'whole_trace'
    from whole_trace_step
    anti join found_steps using (run_id, trace_id)
),

ordered_steps as materialized (
    select
        *,
        row_number() over (partition by run_id, trace_id order by host_start_ns, event_idx) as step_idx,
        count(*) over (partition by run_id, trace_id) as step_count
    from host_steps
),

-- tb_plugin's runtimes on ProfilerStep traces; every launch on the others.
runtimes as (
    select runtime_calls.run_id, runtime_calls.trace_id, runtime_calls.correlation, runtime_calls.ts_ns, runtime_calls.end_ns
    from runtime_calls
    left join (select distinct run_id, trace_id, true as stepped from profiler_steps) as stepped
        using (run_id, trace_id)
    where lower(runtime_calls.cat) = 'runtime' or stepped.stepped is null
),

device_ops as (
    select run_id, trace_id, correlation, ts_ns, end_ns from kernels where lower(cat) = 'kernel'
    union all
    select run_id, trace_id, correlation, ts_ns, end_ns from gpu_memcpy
    union all
    select run_id, trace_id, correlation, ts_ns, end_ns from gpu_memset
),

-- A runtime belongs to the step that holds it entirely (steps are ordered and disjoint, as the two-way merge assumes).
runtimes_in_steps as (
    select runtimes.run_id, runtimes.trace_id, runtimes.correlation, ordered_steps.step_idx
    from runtimes
    asof join ordered_steps
        on runtimes.run_id = ordered_steps.run_id
        and runtimes.trace_id = ordered_steps.trace_id
        and runtimes.ts_ns >= ordered_steps.host_start_ns
    where runtimes.end_ns <= ordered_steps.host_end_ns
),

device_ops_matched as materialized (
    select device_ops.*, runtimes_in_steps.step_idx
    from device_ops
    left join runtimes_in_steps
        on device_ops.run_id = runtimes_in_steps.run_id
        and device_ops.trace_id = runtimes_in_steps.trace_id
        and device_ops.correlation = runtimes_in_steps.correlation
),

step_device as (
    select run_id, trace_id, step_idx, min(ts_ns) as device_start_ns, max(end_ns) as device_end_ns, count(*) as device_ops
    from device_ops_matched
    where step_idx is not null
    group by run_id, trace_id, step_idx
),

steps_with_device as materialized (
    select
        ordered_steps.*,
        step_device.device_start_ns,
        step_device.device_end_ns,
        coalesce(step_device.device_ops, 0) as device_ops
    from ordered_steps
    left join step_device using (run_id, trace_id, step_idx)
),

-- The end of the "previous step" before the first one: the first step's host start, or the latest end of a device
-- op launched outside every step that ends before the first step's first device op.
first_step as (
    select * from steps_with_device where step_idx = 1
),

initial_prev_end as (
    select
        first_step.run_id,
        first_step.trace_id,
        greatest(
            first_step.host_start_ns,
            max(unmatched.end_ns) filter (where unmatched.end_ns < first_step.device_start_ns)
        ) as prev_end_ns
    from first_step
    left join device_ops_matched as unmatched
        on first_step.run_id = unmatched.run_id
        and first_step.trace_id = unmatched.trace_id
        and unmatched.step_idx is null
    where exists (
        select 1 from step_device
        where step_device.run_id = first_step.run_id and step_device.trace_id = first_step.trace_id
    )
    group by first_step.run_id, first_step.trace_id, first_step.host_start_ns
),

-- The sequential rule end_i = max(E_i, start_i), start_i = max(end_{i-1}, H_i) with E_i = max(host end, device end)
-- unrolls to end_i = max(prev0, max_{j<=i} max(E_j, H_j)), so it is a running max.
device_side as (
    select
        steps_with_device.*,
        initial_prev_end.prev_end_ns is not null as uses_device,
        initial_prev_end.prev_end_ns as initial_prev_end_ns,
        greatest(host_end_ns, device_end_ns, host_start_ns) as reach_ns
    from steps_with_device
    left join initial_prev_end using (run_id, trace_id)
),

adjusted as materialized (
    select
        *,
        case
            when uses_device then greatest(
                initial_prev_end_ns,
                host_start_ns,
                max(reach_ns) over (
                    partition by run_id, trace_id order by step_idx rows between unbounded preceding and 1 preceding
                )
            )
            else host_start_ns
        end as start_ns,
        case
            when uses_device then greatest(
                initial_prev_end_ns,
                max(reach_ns) over (partition by run_id, trace_id order by step_idx rows unbounded preceding)
            )
            else host_end_ns
        end as end_ns
    from device_side
),

-- Tail pruning (only of ProfilerStep steps, when device ops were matched and there are several steps).
last_active as (
    select
        run_id,
        trace_id,
        max(step_idx) filter (where device_ops > 0) as last_idx
    from adjusted
    where uses_device and step_count > 1 and step_rule = 'profiler_step'
    group by run_id, trace_id
),

keep as (
    select
        last_active.run_id,
        last_active.trace_id,
        case
            when last_active.last_idx > 1 and previous.device_ops * 0.8 > last.device_ops then last_active.last_idx - 1
            else last_active.last_idx
        end as keep_steps
    from last_active
    join adjusted as last
        on last.run_id = last_active.run_id and last.trace_id = last_active.trace_id
        and last.step_idx = last_active.last_idx
    left join adjusted as previous
        on previous.run_id = last_active.run_id and previous.trace_id = last_active.trace_id
        and previous.step_idx = last_active.last_idx - 1
)

select
    adjusted.run_id,
    adjusted.trace_id,
    adjusted.step,
    adjusted.step_rule,
    adjusted.rank,
    adjusted.step_idx,
    adjusted.start_ns,
    adjusted.end_ns,
    adjusted.host_start_ns,
    adjusted.host_end_ns,
    adjusted.device_ops,
    adjusted.uses_device
from adjusted
left join keep using (run_id, trace_id)
where keep.keep_steps is null or adjusted.step_idx <= keep.keep_steps
