-- One row per collective instance per rank, before cross-rank matching. Instances are the NCCL kernels that carry
-- collective args (Collective name ...); a run without any uses its record_param_comms cpu_ops instead (their
-- host-side ranges; 'wait' entries are not collectives). process_group is the Process Group Name ('default' when
-- absent). seq is the Seq arg where every instance of that (rank, process group) has one, else the 0-based order of
-- the instance by start time within the (rank, process group). Instances sharing (rank, process group, seq), as
-- coalesced kernels may, are folded into one (first start, last end).
-- grain: run_id, rank, process_group, seq
-- source: TraceLens NcclAnalyser (collective_id = PG name + rank-local order); ANCHORS.md §4, §10.6
with

kernel_instances as (
    select
        run_id, trace_id, rank, collective_name, ts_ns, end_ns, in_msg_nelems, out_msg_nelems, group_size, dtype,
        process_group_name, process_group_ranks, seq, 'kernel' as source
    from kernels
    where collective_name is not null
),

cpu_instances as (
    select
        run_id, trace_id, rank, collective_name, ts_ns, end_ns, in_msg_nelems, out_msg_nelems, group_size, dtype,
        process_group_name, process_group_ranks, seq, 'cpu_op' as source
    from cpu_ops
    where name = 'record_param_comms'
        and collective_name is not null
        and collective_name != 'wait'
        and run_id not in (select run_id from kernel_instances)
),

instances as (
    select * from kernel_instances
    union all
    select * from cpu_instances
),

keyed as (
    select
        *,
        coalesce(process_group_name, 'default') as process_group,
        count(seq) over per_group = count(*) over per_group as has_seq,
        row_number() over (per_group order by ts_ns, end_ns) - 1 as order_in_group
    from instances
    window per_group as (partition by run_id, rank, coalesce(process_group_name, 'default'))
),

sequenced as (
    select
        *,
        case when has_seq then seq else order_in_group end as seq_key
    from keyed
)

select
    run_id,
    rank,
    process_group,
    seq_key as seq,
    any_value(trace_id) as trace_id,
    any_value(collective_name) as name,
    min(ts_ns) as start_ns,
    max(end_ns) as end_ns,
    max(in_msg_nelems) as in_msg_nelems,
    max(out_msg_nelems) as out_msg_nelems,
    max(group_size) as group_size,
    any_value(dtype) as dtype,
    any_value(process_group_ranks) as process_group_ranks,
    any_value(source) as source,
    case when bool_and(has_seq) then 'seq' else 'order' end as seq_source,
    count(*) as instance_count
from sequenced
group by run_id, rank, process_group, seq_key
