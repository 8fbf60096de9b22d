-- One row per range of the op trees linked into its tree: op_tree (transforms/op_tree.py, which defines depth, pos,
-- last_pos, the parent and the merge into it) over each piece of int_op_tree_ranges, built a batch of pieces at a
-- time. A piece's positions follow those of its thread's pieces before it, so they count from the thread's first
-- range as if its ranges had been linked at once.
-- grain: thread_no, event_idx
-- source: torch.autograd.profiler_util EventList._populate_cpu_children (torch 2.x); torch-tb-profiler 0.4.3 op_tree.py
-- pieces: int_op_tree_ranges
-- piece_name: format('thread {} of trace {} in ProfilerStep#{} to #{}', any_value(thread_key), any_value(trace_id), min(step), max(step))
with

linked as (
    select
        piece,
        tree,
        trace_id,
        thread_key,
        thread_no,
        pos_offset,
        op_tree(list({
            'event_idx': event_idx, 'ts_ns': ts_ns, 'dur_ns': dur_ns, 'name_no': name_no,
            'is_operator': is_operator, 'is_plain_operator': is_plain_operator, 'torch_tree': torch_tree,
            'device_ns': device_ns, 'kernel_count': kernel_count
        })) as nodes
    from int_op_tree_ranges
    -- the batch the runner builds (every piece where nothing sets it)
    where piece between coalesce(getvariable('first_piece'), 0)
        and coalesce(getvariable('last_piece'), 9223372036854775807)
    group by piece, tree, trace_id, thread_key, thread_no, pos_offset
)

select
    node.tree,
    node.trace_id,
    node.thread_key,
    node.thread_no,
    node.event_idx,
    node.depth,
    (node.pos_offset + node.pos)::integer as pos,
    node.parent_event_idx,
    (node.pos_offset + node.last_pos)::integer as last_pos,
    node.merged_into_parent,
    node.children_ns,
    node.self_device_ns,
    node.device_total_ns,
    node.kernel_count
from (select * exclude (nodes), unnest(nodes, recursive := true) from linked) as node
