-- One row per host range (int_host_ranges) in each of two op trees, with its place in the tree and its own and
-- subtree figures, as torch's FunctionEvent has them.
-- The trees nest by time containment per thread ([ts, end) nests in its parent; ties: earlier start, then longer,
-- then trace order):
-- tree 'torch': cpu_op and user_annotation ranges per (pid, tid), as torch's key_averages nests FunctionEvents.
-- tree 'tb_plugin': Operator ranges, ProfilerStep#N, nccl:/gloo: annotations and nn.Module python functions per tid,
-- as torch-tb-profiler's op tree (event_parser.py, op_tree.py).
-- op_tree() (transforms/op_tree.py, which defines depth, pos, last_pos, the parent and the merge into it) links
-- each thread's ranges in O(n log n), a piece of its steps at a time (int_op_tree_ranges, int_op_tree_links); a
-- subtree is the contiguous positions pos .. last_pos.
-- Figures: self CPU = duration − the parts of its direct children inside it; self device = duration of the GPU
-- activities (kernels, memcpy, memset) the node launched itself; total device and kernel_count add those (and
-- the kernels among them) of its whole subtree. A GPU activity's launcher is the node whose
-- External id is that of the runtime call with the activity's correlation (else the activity's own External id).
-- Nodes without an External id (nn.Module ranges of the tb_plugin tree) launch nothing themselves.
-- Read by every model that needs the trees: op_stats, op_stats_by_shape, source_stats, annotation_stats,
-- module_stats, op_perf, memory_by_op, kernel_sequences, int_op_source_frames and int_memory_records.
-- source: torch.autograd.profiler_util EventList._populate_cpu_children, FunctionEvent (self_cpu_time_total,
-- device_time_total) (torch 2.x); torch-tb-profiler 0.4.3 op_tree.py
select
    links.tree,
    host_range.run_id,
    links.trace_id,
    host_range.rank,
    host_range.pid,
    host_range.tid,
    links.thread_key,
    -- numbers (tree, trace, thread_key) within this build: an integer to partition and join by
    links.thread_no,
    links.event_idx,
    host_range.name,
    host_range.cat,
    host_range.ts_ns,
    host_range.dur_ns,
    host_range.end_ns,
    host_range.external_id,
    links.depth,
    links.pos,
    links.parent_event_idx,
    links.last_pos,
    links.merged_into_parent,
    host_range.dur_ns - links.children_ns as self_cpu_ns,
    links.self_device_ns,
    links.device_total_ns,
    links.kernel_count
from int_op_tree_links as links
join int_host_ranges as host_range
    on host_range.trace_id = links.trace_id
    and host_range.event_idx = links.event_idx
