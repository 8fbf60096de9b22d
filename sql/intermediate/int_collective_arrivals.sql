-- One row per collective instance per rank that took part in it, keyed so that the same instance has the same key on
-- every rank, with the step it was issued in and the ranks expected at it: what stragglers and straggler_steps
-- compare. Instances: the rows of `collectives` (NCCL kernels or record_param_comms; key: process group and seq,
-- by its match_rule), and the gloo collectives of int_comm_instances (torch writes no Seq for gloo: key: the
-- process group int_comm_instances finds for the gloo worker thread, the collective's name and its order among
-- that rank's instances of that group and name; gloo runs a group's collectives in issue order on every member).
-- gloo sends and receives are not collectives: they have one peer, not a group to arrive at (pipeline_stages reads
-- them). NCCL's are kept, as collectives keeps them: its SendRecv kernels also carry all-to-all, which is one.
-- step: the step int_comm_instances puts the instance in (the step holding its issue point); a record_param_comms
-- instance (its host range) the host step holding its start; an instance matched on several ranks takes the
-- lowest of their steps, so that one instance is in one step. Null outside every step.
-- members: the ranks of its process group (Process Group Ranks, or distributedInfo.pg_config), else every rank
-- traced in the run.
-- grain: run_id, rank, backend, instance
-- column: backend: nccl (collectives) or gloo
-- column: instance: the instance's key, the same on every rank
-- column: process_group: its process group (null where a gloo thread's group was not found)
-- column: match_rule: seq (the trace's Seq) or order (name and order within the group)
-- column: start_ns: the rank's arrival (the collective's start on it)
-- column: matched_ranks: ranks the instance was found on
-- column: members: the ranks expected at it
-- source: TraceLens NcclAnalyser (collective matching); tracelake int_collectives, int_comm_instances
with

nccl as (
    select
        collectives.run_id,
        collectives.trace_id,
        collectives.rank,
        'nccl' as backend,
        collectives.process_group || ':' || collectives.seq as instance,
        collectives.process_group,
        collectives.name,
        collectives.match_rule,
        collectives.start_ns,
        collectives.end_ns,
        coalesce(comm.step, host_step.step) as rank_step,
        try_cast(int_collectives.process_group_ranks as bigint[]) as group_ranks
    from collectives
    join int_collectives using (run_id, rank, process_group, seq)
    left join int_comm_instances as comm
        on comm.trace_id = collectives.trace_id
        and comm.start_ns = collectives.start_ns
        and comm.name = collectives.name
        and comm.source = 'kernel'
    asof left join int_steps as host_step
        on host_step.trace_id = collectives.trace_id
        and collectives.source = 'cpu_op'
        and host_step.host_start_ns <= collectives.start_ns
    -- kernels of two groups (streams) may start at the same ns under the same name: each keeps one step
    qualify row_number() over (
        partition by collectives.run_id, collectives.rank, collectives.process_group, collectives.seq
        order by comm.step
    ) = 1
),

gloo as (
    select
        run_id,
        trace_id,
        rank,
        'gloo' as backend,
        coalesce(process_group, '?') || ':' || name || ':'
            || row_number() over (partition by run_id, rank, process_group, name order by start_ns, end_ns)
            as instance,
        process_group,
        name,
        'order' as match_rule,
        start_ns,
        end_ns,
        step as rank_step,
        group_ranks
    from int_comm_instances
    where source = 'gloo' and kind = 'collective'
),

instances as (
    select * from nccl
    union all
    select * from gloo
),

run_ranks as (
    select run_id, list(distinct rank order by rank) as run_ranks
    from traces
    group by run_id
)

select
    instances.run_id,
    instances.rank,
    instances.backend,
    instances.instance,
    instances.trace_id,
    instances.process_group,
    instances.name,
    instances.match_rule,
    instances.start_ns,
    instances.end_ns,
    min(instances.rank_step) over per_instance as step,
    count(*) over per_instance as matched_ranks,
    coalesce(instances.group_ranks, run_ranks.run_ranks) as members
from instances
join run_ranks using (run_id)
window per_instance as (partition by instances.run_id, instances.backend, instances.instance)
