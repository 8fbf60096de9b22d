-- One row per host range the op trees are built from (int_op_nodes), with kind saying which: cpu ops, user
-- annotations recorded on the host, and nn.Module python functions.
-- in_torch_tree / in_tb_plugin_tree say which op tree a range belongs to (int_op_nodes defines the trees): torch's
-- holds every op and annotation, tb_plugin's the ops, ProfilerStep#N, the nccl:/gloo: collectives and the modules.
-- A view: scanning the raw files again is cheaper than holding every column of every range in memory.
-- materialized: view
select
    *,
    kind != 'module' as in_torch_tree,
    kind in ('op', 'module') or starts_with(name, 'ProfilerStep#') or name in (
        'nccl:broadcast', 'nccl:reduce', 'nccl:all_reduce', 'nccl:all_gather', 'nccl:reduce_scatter',
        'gloo:broadcast', 'gloo:reduce', 'gloo:all_reduce', 'gloo:all_gather', 'gloo:reduce_scatter'
    ) as in_tb_plugin_tree
from (
select 'op' as kind, run_id, trace_id, rank, pid, tid, event_idx, name, cat, ts_ns, dur_ns, end_ns, external_id
from cpu_ops
union all
select 'annotation' as kind, run_id, trace_id, rank, pid, tid, event_idx, name, cat, ts_ns, dur_ns, end_ns, external_id
from annotations
where not coalesce(on_device, false)
union all
select 'module' as kind, run_id, trace_id, rank, pid, tid, event_idx, name, cat, ts_ns, dur_ns, end_ns, null
from python_functions
where python_module_id is not null
)
