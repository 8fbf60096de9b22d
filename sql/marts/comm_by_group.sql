-- One row per rank, step, process group and phase that communicated: how long, how much of it exposed, how many
-- bytes. Instances, their step, phase and group are int_comm_instances': NCCL kernels (group, description and
-- ranks from their collective args and distributedInfo.pg_config) and gloo ranges (send/recv included).
-- Phase, from where the host issued the instance: 'optimizer' under torch's `Optimizer.step#<class>.step`
-- range, 'backward' under autograd's `autograd::engine::evaluate_function: ...` ranges or on an autograd-only
-- thread (or under torch.distributed.pipelining's `Backward N`), else 'forward'.
-- communication_ns: the union of the instances' time spans (concurrent ones count once). exposed_ns: the part of
-- it not hidden under computation (int_compute_busy): NCCL kernels against the trace's computation kernels (HTA's
-- overlap), gloo ranges against the host's computing ops, since gloo runs on host threads. bytes: Σ message
-- sizes (int_comm_instances).
-- gloo names no group on its ranges (torch 2.13): int_comm_instances tells a collective's group by the worker
-- thread it ran on and the members that ran it at the same time; a send or receive gets the rank's only group where
-- it has one, else null (one row per step and phase for those). The 1F1B schedule of torch.distributed.pipelining
-- issues a micro-batch's gradient send/recv outside autograd's ranges and its own annotations, so they count as
-- forward there.
-- grain: run_id, rank, step, process_group, phase, trace_id
-- source: HTA 0.5.0 get_comm_comp_overlap (communication under computation kernels), per group, phase and step
-- column: process_group: Process Group Name (pg_name of distributedInfo.pg_config); null where the trace does not say
-- column: phase: forward, backward or optimizer
-- column: group_desc: the group's description (pg_desc, e.g. default_pg, or what new_group was given)
-- column: group_ranks: the group's global ranks
-- column: collectives: communication instances (collectives and sends/receives)
-- column: communication_ns: time communicating (union of the instances' spans)
-- column: exposed_ns: communication time not hidden under computation
-- column: bytes: message bytes
-- column: exposed_step_ratio: exposed_ns / the step's duration (int_steps)
-- column: trace_id: the trace of the step (a rank's trace files may each number their steps from 0)
with

-- group_key stands for the group in joins: null (not known) is a group of its own.
instances as (
    select *, source = 'kernel' as on_device, coalesce(process_group, '') as group_key
    from int_comm_instances
),

flagged as (
    select
        *,
        coalesce(
            start_ns > max(end_ns) over (
                partition by trace_id, step, group_key, phase, on_device order by start_ns, end_ns
                rows between unbounded preceding and 1 preceding
            ),
            true
        ) as opens
    from instances
),

islands as (
    select
        *,
        sum(opens::int) over (partition by trace_id, step, group_key, phase, on_device order by start_ns, end_ns)
            as island
    from flagged
),

merged as (
    select trace_id, step, group_key, phase, on_device, min(start_ns) as start_ns, max(end_ns) as end_ns
    from islands
    group by trace_id, step, group_key, phase, on_device, island
),

-- The time under computation up to an instant (int_compute_busy's busy_before_ns): at each merged span's end less
-- at its start.
hidden as (
    select
        merged.trace_id, merged.step, merged.group_key, merged.phase,
        sum(
            coalesce(at_end.busy_before_ns + least(merged.end_ns, at_end.end_ns) - at_end.start_ns, 0)
            - coalesce(at_start.busy_before_ns + least(merged.start_ns, at_start.end_ns) - at_start.start_ns, 0)
        ) as hidden_ns
    from merged
    asof left join int_compute_busy as at_end
        on at_end.trace_id = merged.trace_id
        and at_end.on_device = merged.on_device
        and at_end.start_ns <= merged.end_ns
    asof left join int_compute_busy as at_start
        on at_start.trace_id = merged.trace_id
        and at_start.on_device = merged.on_device
        and at_start.start_ns <= merged.start_ns
    group by all
),

communication as (
    select trace_id, step, group_key, phase, sum(end_ns - start_ns) as communication_ns
    from merged
    group by all
),

counted as (
    select
        run_id, trace_id, rank, step, group_key, process_group, phase,
        any_value(group_desc) as group_desc,
        any_value(group_ranks) as group_ranks,
        count(*) as collectives,
        sum(bytes) as bytes
    from instances
    group by all
)

select
    counted.run_id,
    counted.rank,
    counted.step,
    counted.process_group,
    counted.phase,
    counted.group_desc,
    counted.group_ranks,
    counted.collectives,
    communication.communication_ns::bigint as communication_ns,
    (communication.communication_ns - coalesce(hidden.hidden_ns, 0))::bigint as exposed_ns,
    counted.bytes::bigint as bytes,
    least((communication.communication_ns - coalesce(hidden.hidden_ns, 0))
        / nullif(int_steps.end_ns - int_steps.start_ns, 0), 1.0) as exposed_step_ratio,
    counted.trace_id
from counted
join communication using (trace_id, step, group_key, phase)
left join hidden using (trace_id, step, group_key, phase)
left join int_steps using (trace_id, step)
