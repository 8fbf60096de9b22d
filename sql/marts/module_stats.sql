-- One row per nn.Module in its place in the model (module_path: the `Name_N` of the module and of each enclosing
-- module, outermost first, joined by '/'), as tb_plugin's Module view: calls = occurrences of the module's
-- range (`nn.Module: Name_N` python_function events of with_modules=True / with_stack=True); total CPU = Σ
-- duration; self CPU = Σ (duration − its direct children in tb_plugin's op tree: operators and modules); device
-- total = Σ device time of kernels/memcpy/memset launched inside it (int_op_nodes over the tb_plugin tree).
-- Deliberate differences: tb_plugin keys a module by (name, Python module id) and repeats one module's totals
-- under every parent it was called from; here each path has its own figures, which are the same for a module
-- called from one place. Nesting is by time on the thread (tb_plugin: by the Python parent ids), the same for a
-- module's own call; a module called inside an operator starts a path of its own. tb_plugin also subtracts
-- runtime calls made directly in a module (not inside an op) from its self time; this does not.
-- grain: run_id, trace_id, module_path
-- source: torch-tb-profiler 0.4.3 module_op.py (aggegate_module_view, _process_module_statistics)
with recursive

module_events as (
    select trace_id, event_idx from python_functions where python_module_id is not null
),

modules as (
    select nodes.*, regexp_replace(nodes.name, '^nn\.Module: ', '') as module_name
    from int_op_nodes as nodes
    semi join module_events using (trace_id, event_idx)
    where nodes.tree = 'tb_plugin'
),

paths as (
    select trace_id, thread_no, event_idx, module_name as module_path
    from modules
    where parent_event_idx is null
        or (thread_no, parent_event_idx) not in (select thread_no, event_idx from modules)
    union all
    select child.trace_id, child.thread_no, child.event_idx, parent.module_path || '/' || child.module_name
    from modules as child
    join paths as parent
        on parent.thread_no = child.thread_no
        and parent.event_idx = child.parent_event_idx
)

select
    modules.run_id,
    modules.trace_id,
    paths.module_path,
    count(*) as calls,
    sum(modules.dur_ns)::bigint as total_cpu_ns,
    sum(modules.self_cpu_ns)::bigint as self_cpu_ns,
    sum(modules.device_total_ns)::bigint as total_device_ns,
    any_value(modules.rank) as rank
from modules
join paths using (thread_no, event_idx)
group by all
