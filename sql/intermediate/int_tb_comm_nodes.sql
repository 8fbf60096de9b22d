-- One row per communication node of a trace as torch-tb-profiler 0.4.3 builds them: one per External id of a
-- nccl:*/gloo:* op (the op latest in time wins, as its dict does), numbered by (start, -end), with the step that
-- holds it (null when none does) and its size = Σ prod(Input Dims) × bytes of its Input type. A trace that mixes
-- nccl and gloo gets no nodes (tb_plugin then disables its distributed view). window_ord numbers the traces of one
-- rank by time, so that the i-th window of every rank is matched with the i-th window of the others.
-- grain: run_id, trace_id, node_pos
-- source: torch-tb-profiler 0.4.3 event_parser.py (_parse_node), communication.py (generate_communication_nodes, analyze_communication_nodes); ANCHORS.md §3.7
with

comm_ops as materialized (
    select * from int_tb_comm_ops
),

trace_libs as (
    select run_id, trace_id, count(distinct comm_lib) as libs
    from comm_ops
    group by run_id, trace_id
),

ranked_ops as (
    select
        *,
        row_number() over (
            partition by run_id, trace_id, external_id order by start_ns desc, event_idx desc
        ) as recency,
        min(event_idx) over (partition by run_id, trace_id, external_id) as first_event_idx
    from comm_ops
),

nodes as (
    select ranked_ops.*
    from ranked_ops
    join trace_libs using (run_id, trace_id)
    where ranked_ops.recency = 1 and trace_libs.libs = 1
),

-- Bytes per element of tb_plugin's type names; any other type counts 0 bytes.
sized as (
    select
        nodes.*,
        try(from_json(input_dims, '[["bigint"]]')) as dims,
        try(from_json(input_types, '["varchar"]')) as types
    from nodes
),

windows as (
    select
        run_id,
        trace_id,
        row_number() over (partition by run_id, rank order by window_start_ns, trace_id) as window_ord
    from traces
    where status != 'failed'
),

numbered as (
    select
        sized.run_id,
        sized.trace_id,
        sized.rank,
        row_number() over (
            partition by sized.run_id, sized.trace_id order by start_ns, end_ns desc, first_event_idx
        ) as node_pos,
        sized.name,
        sized.comm_lib,
        sized.external_id,
        sized.event_idx,
        sized.start_ns,
        sized.end_ns,
        coalesce(list_sum(list_transform(
            range(len(dims)),
            lambda i: coalesce(list_product(dims[i + 1]), 1)::bigint * case types[i + 1]
                when 'long int' then 8
                when 'float' then 4
                when 'int' then 4
                when 'c10::Half' then 2
                when 'c10::BFloat16' then 2
                when 'unsigned char' then 1
                else 0
            end
        )), 0)::bigint as size_bytes,
        windows.window_ord
    from sized
    left join windows using (run_id, trace_id)
)

select
    numbered.run_id,
    numbered.trace_id,
    numbered.node_pos,
    numbered.rank,
    numbered.window_ord,
    numbered.name,
    numbered.comm_lib,
    numbered.external_id,
    numbered.event_idx,
    numbered.start_ns,
    numbered.end_ns,
    numbered.size_bytes,
    case when numbered.end_ns <= int_steps.end_ns then int_steps.step end as step
from numbered
asof left join int_steps
    on numbered.run_id = int_steps.run_id
    and numbered.trace_id = int_steps.trace_id
    and numbered.start_ns >= int_steps.start_ns
