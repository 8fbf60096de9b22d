-- One row per host range that sets the training phase of what starts inside it on its thread: 'optimizer' for
-- torch's `Optimizer.step#<class>.step` range (torch.optim's profiling hook wraps the step and its hooks),
-- 'backward' for autograd's `autograd::engine::evaluate_function: ...` ranges, for torch.distributed.pipelining's
-- `Backward N` ranges (GPipe), and for the whole span of a thread that runs autograd only (evaluate_function ranges
-- and no ProfilerStep#: the autograd engine's device threads, whose work between two functions is backward too),
-- from its first cpu_op to its last.
-- A point of a thread is in the optimizer when an optimizer range holds it, else in backward when a backward range
-- holds it, else in forward. Read by int_comm_instances (the phase a collective was issued in) and step_mfu (forward
-- work run again under backward).
-- One row per stretch of a thread in one phase: the phase's ranges of the thread ([ts_ns, end_ns), those of
-- positive length) merged where they overlap or touch, so that a point lies in a range of the phase exactly when it
-- lies in the stretch starting last at or before it (an ASOF join, not a join of each point with every range).
-- grain: trace_id, tid, phase, ts_ns
-- source: torch.optim.Optimizer.profile_hook_step; torch autograd engine (evaluate_function); torch.distributed.pipelining schedules
with

ranges as (
    select trace_id, tid, ts_ns, end_ns, 'optimizer' as phase
    from annotations
    where starts_with(name, 'Optimizer.step#') and not on_device
    union all
    select trace_id, tid, ts_ns, end_ns, 'backward' as phase
    from annotations
    where regexp_full_match(name, 'Backward \d+') and not on_device
    union all
    select trace_id, tid, ts_ns, end_ns, 'backward' as phase
    from cpu_ops
    where starts_with(name, 'autograd::engine::evaluate_function: ')
),

autograd_threads as (
    select trace_id, tid from ranges where phase = 'backward'
    except
    select trace_id, tid from steps
),

autograd_thread_spans as (
    select ops.trace_id, ops.tid, min(ops.ts_ns) as ts_ns, max(ops.end_ns) as end_ns, 'backward' as phase
    from cpu_ops as ops
    semi join autograd_threads using (trace_id, tid)
    group by ops.trace_id, ops.tid
),

phase_ranges as (
    select * from ranges
    union all
    select * from autograd_thread_spans
),

flagged as (
    select
        *,
        coalesce(
            ts_ns > max(end_ns) over (
                partition by trace_id, tid, phase order by ts_ns, end_ns
                rows between unbounded preceding and 1 preceding
            ),
            true
        ) as opens
    from phase_ranges
    where end_ns > ts_ns
),

islands as (
    select *, sum(opens::int) over (partition by trace_id, tid, phase order by ts_ns, end_ns) as island
    from flagged
)

select trace_id, tid, min(ts_ns) as ts_ns, max(end_ns) as end_ns, phase
from islands
group by trace_id, tid, phase, island
