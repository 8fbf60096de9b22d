-- One row per host op name of a trace, as torch's prof.key_averages() table: calls; CPU total = Σ duration;
-- self CPU = Σ (duration − durations of its direct children on the same thread); device total = Σ duration of
-- kernels/memcpy/memset launched by the op and its descendants; self device = launched by the op itself
-- (per node: int_op_nodes). Ops are cpu_op and user_annotation ranges; ProfilerStep#N rows aggregate as
-- 'ProfilerStep*' like key_averages. It is op_stats_by_shape summed over input shapes, as key_averages() is
-- key_averages(group_by_input_shape=True) summed.
-- As torch's EventList._remove_dup_nodes, an op that is the only child of a same-name parent (an overload wrapper)
-- is merged into that parent: it is not a call of its own, and its self time counts toward the same name.
-- grain: run_id, trace_id, op_name
-- source: torch.autograd.profiler_util FunctionEvent / EventList.key_averages (torch 2.x)
-- column: total_cpu_ns: host time of the op with its children
-- column: self_cpu_ns: host time minus its direct children
-- column: total_device_ns: GPU time launched by the op and its descendants
-- column: self_device_ns: GPU time launched by the op itself
select
    run_id,
    trace_id,
    op_name,
    sum(calls)::bigint as calls,
    sum(total_cpu_ns)::bigint as total_cpu_ns,
    sum(self_cpu_ns)::bigint as self_cpu_ns,
    sum(total_device_ns)::bigint as total_device_ns,
    sum(self_device_ns)::bigint as self_device_ns,
    any_value(rank) as rank
from op_stats_by_shape
group by run_id, trace_id, op_name
