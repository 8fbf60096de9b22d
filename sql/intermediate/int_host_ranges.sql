-- One row per host range the op trees are built from (int_op_nodes), with kind saying which: cpu ops, user
-- annotations recorded on the host, and nn.Module python functions.
-- A view: scanning the raw files again is cheaper than holding every column of every range in memory.
-- materialized: view
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
