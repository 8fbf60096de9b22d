-- One row per host op name of a trace, as torch's prof.key_averages() table: calls; CPU total = Σ duration;
-- self CPU = Σ (duration − durations of its direct children on the same thread); device total = Σ duration of
-- kernels/memcpy/memset launched by the op and its descendants; self device = launched by the op itself.
-- Ops are cpu_op and user_annotation ranges; ProfilerStep#N rows aggregate as 'ProfilerStep*' like key_averages.
-- As torch's EventList._remove_dup_nodes, an op that is the only child of a same-name parent (an overload wrapper)
-- is merged into that parent: it is not a call of its own, and its self time counts toward the same name.
-- A GPU activity's launcher is the op whose External id is that of the runtime call with the activity's
-- correlation (else the activity's own External id).
-- grain: run_id, trace_id, op_name
-- source: torch.autograd.profiler_util FunctionEvent / EventList.key_averages (torch 2.x)
-- column: cpu_total_ns: host time of the op with its children
-- column: self_cpu_ns: host time minus its direct children
-- column: device_total_ns: GPU time launched by the op and its descendants
-- column: self_device_ns: GPU time launched by the op itself
with

nodes as (
    select * from int_op_tree where tree = 'torch'
),

runtime_external_ids as (
    select trace_id, correlation, any_value(external_id) as external_id
    from runtime_calls
    where correlation is not null
    group by all
),

launched as (
    select
        activity.trace_id,
        coalesce(runtime.external_id, activity.external_id) as external_id,
        sum(activity.dur_ns) as device_ns
    from int_kernels_classified as activity
    left join runtime_external_ids as runtime using (trace_id, correlation)
    group by all
),

-- A child counts only for the part of it inside its parent: async ops (e.g. c10d collectives on MTIA)
-- can end after the op that started them, which would otherwise make the parent's self time negative.
children as (
    select
        thread_no, parent_event_idx as event_idx,
        sum(greatest(0, least(end_ns, parent_end_ns) - ts_ns)) as children_ns
    from nodes
    where parent_event_idx is not null
    group by all
),

node_self as (
    select
        nodes.*,
        nodes.dur_ns - coalesce(children.children_ns, 0) as self_cpu_ns,
        coalesce(launched.device_ns, 0) as self_device_ns,
        nodes.merged_into_parent as is_dup
    from nodes
    left join children using (thread_no, event_idx)
    left join launched
        on launched.trace_id = nodes.trace_id
        and launched.external_id = nodes.external_id
),

-- A subtree is the contiguous run of positions pos .. last_pos: its device time is one window frame.
node_totals as (
    select
        *,
        sum(self_device_ns) over (
            partition by thread_no order by pos rows between current row and last_pos - pos following
        ) as total_device_ns
    from node_self
)

select
    run_id,
    trace_id,
    regexp_replace(name, '^ProfilerStep#\d+$', 'ProfilerStep*') as op_name,
    count(*) filter (where not is_dup) as calls,
    coalesce(sum(dur_ns) filter (where not is_dup), 0)::bigint as total_cpu_ns,
    sum(self_cpu_ns)::bigint as self_cpu_ns,
    coalesce(sum(total_device_ns) filter (where not is_dup), 0)::bigint as total_device_ns,
    sum(self_device_ns)::bigint as self_device_ns,
    any_value(rank) as rank
from node_totals
group by all
