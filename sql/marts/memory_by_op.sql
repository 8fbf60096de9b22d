-- One row per device and operator name of a trace, as torch-tb-profiler's Memory Statistics table. A record counts
-- toward the innermost operator node containing it on its tid (frees included, with negative bytes). Self values
-- sum the records of the op itself; the others add every descendant's (a subtree is the contiguous positions
-- pos .. last_pos of int_op_nodes, so it is a difference of prefix sums). calls counts the operator nodes of that
-- name the plugin visits: top-level ones and those whose parent contains some memory record of the tid. Rows whose
-- six sizes and counts are all zero are left out, as in the plugin.
-- grain: run_id, trace_id, device, op_name
-- source: torch-tb-profiler 0.4.3 memory_parser.py::MemorySnapshot.get_memory_statistics; ANCHORS.md §3.8
-- column: size_increase_bytes: net allocated by the op and its children
-- column: self_size_increase_bytes: net allocated by the op itself
-- column: allocation_count: allocations by the op and its children
-- column: self_allocation_count: allocations by the op itself
-- column: allocation_bytes: bytes allocated by the op and its children
-- column: self_allocation_bytes: bytes allocated by the op itself
with

nodes as (
    select * from int_op_nodes where tree = 'tb_plugin'
),

op_nodes as (
    select *
    from nodes
    where lower(cat) in ('cpu_op', 'operator')
        and not starts_with(name, 'ProfilerStep#')
        and not starts_with(name, 'Optimizer.')
        and not (starts_with(name, 'enumerate(DataLoader)#') and ends_with(name, '.__next__'))
        and not starts_with(name, 'enumerate(DataPipe)#')
        and name not in ('DataParallel.forward', 'DistributedDataParallel.forward')
),

records as (
    select
        trace_id, tid, device, node_pos,
        bytes,
        if(bytes > 0, bytes, 0) as allocation_bytes,
        if(bytes > 0, 1, 0) as allocation_count
    from int_memory_records
    where attached_to_op
        and device is not null
),

-- Per thread and device, the records summed by node position, with running totals over positions.
by_pos as (
    select
        trace_id, tid, device, node_pos,
        sum(bytes) as size_increase_bytes,
        sum(allocation_bytes) as allocation_bytes,
        sum(allocation_count) as allocation_count
    from records
    group by all
),

prefix as (
    select
        *,
        sum(size_increase_bytes) over w as cum_size_increase_bytes,
        sum(allocation_bytes) over w as cum_allocation_bytes,
        sum(allocation_count) over w as cum_allocation_count
    from by_pos
    window w as (partition by trace_id, tid, device order by node_pos rows unbounded preceding)
),

thread_devices as (
    select distinct trace_id, tid, device from records
),

node_devices as (
    select op_nodes.*, thread_devices.device
    from op_nodes
    join thread_devices
        on thread_devices.trace_id = op_nodes.trace_id
        and thread_devices.tid = op_nodes.thread_key
),

node_metrics as (
    select
        node.run_id,
        node.trace_id,
        node.rank,
        node.device,
        node.name,
        node.merged_into_parent,
        coalesce(self.size_increase_bytes, 0) as self_size_increase_bytes,
        coalesce(self.allocation_bytes, 0) as self_allocation_bytes,
        coalesce(self.allocation_count, 0) as self_allocation_count,
        coalesce(upto.cum_size_increase_bytes, 0) - coalesce(before.cum_size_increase_bytes, 0)
            as size_increase_bytes,
        coalesce(upto.cum_allocation_bytes, 0) - coalesce(before.cum_allocation_bytes, 0) as allocation_bytes,
        coalesce(upto.cum_allocation_count, 0) - coalesce(before.cum_allocation_count, 0) as allocation_count
    from node_devices as node
    left join by_pos as self
        on self.trace_id = node.trace_id
        and self.tid = node.thread_key
        and self.device = node.device
        and self.node_pos = node.pos
    asof left join prefix as upto
        on upto.trace_id = node.trace_id
        and upto.tid = node.thread_key
        and upto.device = node.device
        and upto.node_pos <= node.last_pos
    asof left join prefix as before
        on before.trace_id = node.trace_id
        and before.tid = node.thread_key
        and before.device = node.device
        and before.node_pos < node.pos
),

metrics_by_name as (
    select
        run_id,
        trace_id,
        device,
        name as op_name,
        coalesce(sum(size_increase_bytes) filter (where not merged_into_parent), 0) as size_increase_bytes,
        sum(self_size_increase_bytes) as self_size_increase_bytes,
        coalesce(sum(allocation_count) filter (where not merged_into_parent), 0) as allocation_count,
        sum(self_allocation_count) as self_allocation_count,
        coalesce(sum(allocation_bytes) filter (where not merged_into_parent), 0) as allocation_bytes,
        sum(self_allocation_bytes) as self_allocation_bytes,
        any_value(rank) as rank
    from node_metrics
    group by all
),

-- A node is visited when it is top-level or its parent holds a memory record of the tid (any device).
thread_records as (
    select trace_id, tid, ts_ns from int_memory_records
),

-- records_through: how many records of the tid lie at or before ts_ns.
records_before as (
    select
        trace_id, tid, ts_ns,
        sum(count(*)) over (partition by trace_id, tid order by ts_ns rows unbounded preceding) as records_through
    from thread_records
    group by trace_id, tid, ts_ns
),

parent_visited as (
    select
        nodes.trace_id,
        nodes.event_idx,
        nodes.dur_ns > 0
            and coalesce(at_end.records_through, 0) > coalesce(at_start.records_through, 0) as holds_record
    from nodes
    -- on a thread without records no node holds one (the left join below leaves holds_record null there)
    semi join (select distinct trace_id, tid from thread_records) as record_threads
        on record_threads.trace_id = nodes.trace_id
        and record_threads.tid = nodes.thread_key
    asof left join records_before as at_end
        on at_end.trace_id = nodes.trace_id
        and at_end.tid = nodes.thread_key
        and at_end.ts_ns < nodes.end_ns
    asof left join records_before as at_start
        on at_start.trace_id = nodes.trace_id
        and at_start.tid = nodes.thread_key
        and at_start.ts_ns < nodes.ts_ns
),

-- A node folded into its same-name parent is no call; the children of a folded node hang from its parent.
effective_parents as (
    select
        child.trace_id,
        child.event_idx,
        child.name,
        child.merged_into_parent,
        if(parent.merged_into_parent, parent.parent_event_idx, child.parent_event_idx) as parent_event_idx
    from op_nodes as child
    -- calls are only reported for the op names that have memory metrics
    semi join metrics_by_name
        on metrics_by_name.trace_id = child.trace_id
        and metrics_by_name.op_name = child.name
    left join nodes as parent
        on parent.trace_id = child.trace_id
        and parent.thread_key = child.thread_key
        and parent.event_idx = child.parent_event_idx
),

calls as (
    select effective_parents.trace_id, effective_parents.name, count(*) as calls
    from effective_parents
    left join parent_visited
        on parent_visited.trace_id = effective_parents.trace_id
        and parent_visited.event_idx = effective_parents.parent_event_idx
    where not effective_parents.merged_into_parent
        and (effective_parents.parent_event_idx is null or parent_visited.holds_record)
    group by all
)

select
    metrics_by_name.run_id,
    metrics_by_name.trace_id,
    metrics_by_name.device,
    metrics_by_name.op_name,
    coalesce(calls.calls, 0) as calls,
    metrics_by_name.size_increase_bytes,
    metrics_by_name.self_size_increase_bytes,
    metrics_by_name.allocation_count,
    metrics_by_name.self_allocation_count,
    metrics_by_name.allocation_bytes,
    metrics_by_name.self_allocation_bytes,
    metrics_by_name.rank
from metrics_by_name
left join calls
    on calls.trace_id = metrics_by_name.trace_id
    and calls.name = metrics_by_name.op_name
where metrics_by_name.size_increase_bytes != 0
    or metrics_by_name.self_size_increase_bytes != 0
    or metrics_by_name.allocation_count != 0
    or metrics_by_name.self_allocation_count != 0
    or metrics_by_name.allocation_bytes != 0
    or metrics_by_name.self_allocation_bytes != 0
