-- One row per collective instance per rank, before cross-rank matching. Instances are, from the best a run's traces
-- give: the NCCL kernels that carry collective args (Collective name ...); else the record_param_comms cpu_ops that
-- name their collective (their host-side ranges; 'wait' entries are not collectives); else, for traces written
-- before kineto exported collective args (PyTorch of 2023: record_param_comms without a name or process group), the
-- communication kernels themselves (int_kernels_classified), named by their kernel name (ncclKernel_AllReduce_... is
-- AllReduce) with the stream they run on as their process group (each NCCL communicator has its stream; HTA matches
-- ranks' communication kernels by stream and name too) and no message size. process_group is the Process Group
-- Name ('default' when absent). seq is the Seq arg where every instance of that process group has one on every rank
-- of the run (PyTorch numbers each group's collectives, the same on every member, so profilers can pair them across
-- ranks), else the 0-based order of the instance by start time within its (rank, process group): one rule per group,
-- so that a Seq on some ranks only never pairs a numbered instance with a counted one. match_rule says which. Comms
-- Id is not a key: kineto writes it per rank. Instances sharing (rank, process group, seq), as coalesced kernels
-- may, are folded into one (first start, last end).
-- grain: run_id, rank, process_group, seq
-- source: TraceLens NcclAnalyser (collective_id = PG name + rank-local order); HTA 0.5.0
-- hta/analyzers/straggler.py (ncclKernel_* kernels grouped by stream and name across ranks); ANCHORS.md §4, §10.6
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

kernel_name_instances as (
    select
        run_id, trace_id, rank,
        coalesce(
            nullif(regexp_extract(name, '^nccl(?:Dev)?Kernel_([A-Za-z]+)', 1), ''), split_part(name, '(', 1)
        ) as collective_name,
        ts_ns, end_ns,
        null::bigint as in_msg_nelems, null::bigint as out_msg_nelems, null::bigint as group_size,
        null::varchar as dtype,
        'stream ' || stream as process_group_name,
        null::varchar as process_group_ranks, null::bigint as seq, 'kernel_name' as source
    from int_kernels_classified
    where kernel_type = 'COMMUNICATION'
        and source_table = 'kernels'
        and run_id not in (select run_id from kernel_instances)
        and run_id not in (select run_id from cpu_instances)
),

instances as (
    select * from kernel_instances
    union all
    select * from cpu_instances
    union all
    select * from kernel_name_instances
),

keyed as (
    select
        *,
        coalesce(process_group_name, 'default') as process_group,
        count(seq) over run_group = count(*) over run_group as has_seq,
        row_number() over (per_group order by ts_ns, end_ns) - 1 as order_in_group
    from instances
    window
        per_group as (partition by run_id, rank, coalesce(process_group_name, 'default')),
        run_group as (partition by run_id, coalesce(process_group_name, 'default'))
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
    case when bool_and(has_seq) then 'seq' else 'order' end as match_rule,
    count(*) as instance_count
from sequenced
group by run_id, rank, process_group, seq_key
