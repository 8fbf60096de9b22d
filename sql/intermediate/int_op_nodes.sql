-- One row per host range (int_host_ranges) in each of two op trees, with its place in the tree and its own and
-- subtree figures, as torch's FunctionEvent has them.
-- The trees nest by time containment per thread ([ts, end) nests in its parent; ties: earlier start, then longer,
-- then trace order):
-- tree 'torch': cpu_op and user_annotation ranges per (pid, tid), as torch's key_averages nests FunctionEvents.
-- tree 'tb_plugin': Operator ranges, ProfilerStep#N, nccl:/gloo: annotations and nn.Module python functions per tid,
-- as torch-tb-profiler's op tree (event_parser.py, op_tree.py).
-- op_tree() (transforms/op_tree.py, which defines depth, pos, last_pos, the parent and the merge into it) links
-- each thread's ranges in O(n log n); a subtree is the contiguous positions pos .. last_pos. It links a piece of
-- a thread at a time (int_op_tree_ranges: the thread's ranges between two steps that no range crosses), the model
-- a batch of pieces: a piece's positions follow those of its thread's pieces before it, so they count from the
-- thread's first range as if its ranges had been linked at once.
-- Figures: self CPU = duration − the parts of its direct children inside it; self device = duration of the GPU
-- activities (kernels, memcpy, memset) the node launched itself; total device and kernel_count add those (and
-- the kernels among them) of its whole subtree. A GPU activity's launcher is the node whose
-- External id is that of the runtime call with the activity's correlation, else (PyTorch ~1.13 traces, whose calls
-- carry their correlation id as External id) the innermost node holding that call on its thread, as HTA links them
-- (int_op_tree_ranges, int_launch_ops), else the activity's own External id.
-- Nodes without an External id (nn.Module ranges of the tb_plugin tree) launch nothing themselves.
-- Read by every model that needs the trees: op_stats, op_stats_by_shape, source_stats, annotation_stats,
-- module_stats, op_perf, memory_by_op, kernel_sequences, int_op_source_frames and int_memory_records.
-- pieces: int_op_tree_ranges
-- piece_name: format('thread {} of trace {} in ProfilerStep#{} to #{}', any_value(thread_key), any_value(trace_id), min(step), max(step))
-- source: torch.autograd.profiler_util EventList._populate_cpu_children, FunctionEvent (self_cpu_time_total,
-- device_time_total) (torch 2.x); torch-tb-profiler 0.4.3 op_tree.py
with

-- Each piece's ranges as one list, linked into its tree in pos order.
linked as (
    select
        piece,
        tree,
        trace_id,
        thread_key,
        thread_no,
        pos_offset,
        op_tree(list({
            'event_idx': event_idx, 'ts_ns': ts_ns, 'dur_ns': dur_ns, 'name_key': name_key,
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
    host_range.run_id,
    node.trace_id,
    host_range.rank,
    host_range.pid,
    host_range.tid,
    node.thread_key,
    -- numbers (tree, trace, thread_key) within this build: an integer to partition and join by
    node.thread_no,
    node.event_idx,
    host_range.name,
    host_range.cat,
    host_range.ts_ns,
    host_range.dur_ns,
    host_range.end_ns,
    host_range.external_id,
    node.depth,
    (node.pos_offset + node.pos)::integer as pos,
    node.parent_event_idx,
    (node.pos_offset + node.last_pos)::integer as last_pos,
    node.merged_into_parent,
    host_range.dur_ns - node.children_ns as self_cpu_ns,
    node.self_device_ns,
    node.device_total_ns,
    node.kernel_count
from (select * exclude (nodes), unnest(nodes, recursive := true) from linked) as node
join int_host_ranges as host_range
    on host_range.trace_id = node.trace_id
    and host_range.event_idx = node.event_idx
