-- One row per time range of a communication node: the op's own range, then (nccl only) every kernel with the same
-- External id, numbered by (start, -end). Ranges are matched across the ranks of one window by position (i-th
-- node, j-th range); the shortest duration among them is the data-transfer time, and each rank's transfer range is
-- [end - min duration, end]. tb_plugin disables the whole view unless every rank has nodes, all have as many nodes,
-- and as many ranges per node: we still match what lines up (`matched_ranks` says across how many ranks) and say
-- in `tb_view_enabled` whether tb_plugin would have shown it.
-- grain: run_id, trace_id, node_pos, range_pos
-- source: torch-tb-profiler 0.4.3 loader.py (_process_distributed_profiles), event_parser.py (_update_communication_node); ANCHORS.md §3.7
with

nodes as materialized (
    select * from int_tb_comm_nodes
),

op_ranges as (
    select run_id, trace_id, node_pos, 0 as source, event_idx, start_ns, end_ns
    from nodes
),

kernel_ranges as (
    select
        nodes.run_id,
        nodes.trace_id,
        nodes.node_pos,
        1 as source,
        kernels.event_idx,
        kernels.ts_ns as start_ns,
        kernels.end_ns
    from nodes
    join kernels
        on kernels.run_id = nodes.run_id
        and kernels.trace_id = nodes.trace_id
        and kernels.external_id is not distinct from nodes.external_id
    where nodes.comm_lib = 'nccl' and lower(kernels.cat) = 'kernel'
),

ranges as (
    select
        *,
        row_number() over (
            partition by run_id, trace_id, node_pos order by start_ns, end_ns desc, source, start_ns, event_idx
        ) as range_pos
    from (select * from op_ranges union all select * from kernel_ranges)
),

located as materialized (
    select
        ranges.*,
        nodes.rank,
        nodes.window_ord,
        nodes.name,
        nodes.step
    from ranges
    join nodes using (run_id, trace_id, node_pos)
),

matched as (
    select
        run_id,
        window_ord,
        node_pos,
        range_pos,
        min(end_ns - start_ns) as min_dur_ns,
        count(*) as matched_ranks
    from located
    group by run_id, window_ord, node_pos, range_pos
),

window_traces as (
    select
        traces.run_id,
        traces.trace_id,
        row_number() over (partition by traces.run_id, traces.rank order by traces.window_start_ns, traces.trace_id)
            as window_ord
    from traces
    where traces.status != 'failed'
),

trace_shape as (
    select
        window_traces.run_id,
        window_traces.window_ord,
        window_traces.trace_id,
        count(distinct nodes.node_pos) as nodes
    from window_traces
    left join nodes using (run_id, trace_id)
    group by all
),

node_shape as (
    select run_id, window_ord, bool_and(range_counts = 1) as ranges_line_up
    from (
        select run_id, window_ord, node_pos, count(distinct range_count) as range_counts
        from (
            select run_id, window_ord, trace_id, node_pos, count(*) as range_count
            from located
            group by all
        )
        group by all
    )
    group by all
),

view_enabled as (
    select
        trace_shape.run_id,
        trace_shape.window_ord,
        count(*) as ranks_in_window,
        min(trace_shape.nodes) > 0
            and min(trace_shape.nodes) = max(trace_shape.nodes)
            and coalesce(any_value(node_shape.ranges_line_up), false) as tb_view_enabled
    from trace_shape
    left join node_shape using (run_id, window_ord)
    group by trace_shape.run_id, trace_shape.window_ord
)

select
    located.run_id,
    located.trace_id,
    located.node_pos,
    located.range_pos,
    located.rank,
    located.window_ord,
    located.name,
    located.step,
    located.start_ns,
    located.end_ns,
    located.end_ns - matched.min_dur_ns as transfer_start_ns,
    located.end_ns as transfer_end_ns,
    matched.min_dur_ns,
    matched.matched_ranks,
    view_enabled.ranks_in_window,
    view_enabled.tb_view_enabled
from located
join matched using (run_id, window_ord, node_pos, range_pos)
join view_enabled using (run_id, window_ord)
