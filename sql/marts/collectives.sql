-- One row per collective instance per rank, matched across the run's ranks by (process group, seq): seq is the
-- trace's Seq arg where the group's instances carry one on every rank (match_rule 'seq'), else, as TraceLens
-- matches, the instance's order within its process group on that rank (match_rule 'order'; see int_collectives).
-- comm latency = min over matched ranks of dur; wait_ns = latest start over matched ranks - this rank's start;
-- start_skew_ns / end_skew_ns = max - min of start / end over matched ranks; msg_bytes = nelems x dtype bytes
-- (Out nelems for all-gather, In nelems otherwise); algbw_gbps = msg_bytes / 2^30 / latency seconds (TraceLens'
-- msg_MB/1024 / latency); busbw_gbps = algbw x 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter
-- and all-to-all, x1 otherwise, n = Group size. Missing ranks or unequal counts degrade to what matches:
-- matched_ranks < expected_ranks flags it (check collectives__all_ranks_matched, and recommendations'
-- missed_collective row). Under match_rule 'order' a rank that skipped one shifts the group's later instances on
-- it: check collectives__same_collective_on_every_rank names the first position where names part.
-- grain: run_id, rank, process_group, seq
-- source: TraceLens NcclAnalyser (nccl_analyser.py); ANCHORS.md §4
-- column: name: collective name
-- column: msg_bytes: message size
-- column: wait_ns: latest start over the matched ranks minus this rank's start
-- column: start_skew_ns: spread of start times over ranks
-- column: end_skew_ns: spread of end times over ranks
-- column: algbw_gbps: algorithm bandwidth
-- column: busbw_gbps: bus bandwidth (algbw scaled by the collective's traffic factor)
-- column: dtype: element type
-- column: expected_ranks: ranks in the process group
-- column: matched_ranks: ranks where this instance was found
-- column: comm_latency_ns: shortest duration over the matched ranks
-- column: source: kernel or cpu_op (record_param_comms)
-- column: match_rule: 'seq' where the trace's Seq matched the instance across ranks, 'order' where its name and order within the process group did
with

sized as (
    select
        *,
        end_ns - start_ns as dur_ns,
        lower(replace(name, '_', '')) as name_key,
        case
            when dtype in ('Double', 'Long', 'ComplexFloat') then 8
            when dtype in ('Float', 'Int', 'UInt32') then 4
            when dtype in ('Half', 'BFloat16', 'Short', 'UInt16') then 2
            when dtype in ('Char', 'Byte', 'Bool', 'UInt8', 'Int8') or dtype like 'Float8%' then 1
            when dtype = 'ComplexDouble' then 16
        end as dtype_bytes
    from int_collectives
),

with_bytes as (
    select
        *,
        case
            when name_key like '%allgather%' then out_msg_nelems
            else in_msg_nelems
        end * dtype_bytes as msg_bytes
    from sized
),

matched as (
    select
        *,
        count(*) over instance as matched_ranks,
        min(dur_ns) over instance as comm_latency_ns,
        max(start_ns) over instance as latest_start_ns,
        max(start_ns) over instance - min(start_ns) over instance as start_skew_ns,
        max(end_ns) over instance - min(end_ns) over instance as end_skew_ns,
        max(msg_bytes) over instance as instance_msg_bytes,
        max(group_size) over instance as instance_group_size
    from with_bytes
    window instance as (partition by run_id, process_group, seq)
),

bandwidth as (
    select
        *,
        instance_msg_bytes / 1073741824.0 / (nullif(comm_latency_ns, 0) / 1e9) as algbw_gbps,
        coalesce(instance_group_size, matched_ranks) as expected_ranks
    from matched
)

select
    run_id,
    rank,
    process_group,
    seq,
    name,
    start_ns,
    end_ns,
    dur_ns,
    msg_bytes,
    latest_start_ns - start_ns as wait_ns,
    start_skew_ns,
    end_skew_ns,
    algbw_gbps,
    algbw_gbps * case
        when name_key like '%allreduce%' then 2.0 * (expected_ranks - 1) / expected_ranks
        when name_key like '%allgather%' or name_key like '%reducescatter%' or name_key like '%alltoall%'
            then 1.0 * (expected_ranks - 1) / expected_ranks
        else 1.0
    end as busbw_gbps,
    trace_id,
    dtype,
    expected_ranks,
    matched_ranks,
    comm_latency_ns,
    source,
    match_rule
from bandwidth
