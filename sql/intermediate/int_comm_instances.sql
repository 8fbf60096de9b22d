-- One row per communication instance on a rank, with when it ran, where the host issued it, and the step, phase and
-- process group it belongs to. Instances are the NCCL kernels of `collectives` (those carrying collective args,
-- point-to-point included, or in older traces those named by the kernel) and the gloo ranges (`gloo:<op>`: a
-- collective's range on one of its group's worker threads, a send's or receive's on the calling thread). What
-- torch 2.13 writes for gloo is in tracelake/workloads.py: no group and no record_param_comms, a `c10d::<op>` call
-- on the calling thread.
-- Issue point (issue_tid, issue_ns): a kernel's launch (the runtime call of its correlation); a gloo range's
-- `c10d::<op>` call: the latest c10d op of the trace started at or before the range with the same tensor shapes
-- (the range's Input Dims are the call's first input), else the latest c10d op at all. A send or receive starts
-- inside its call on the same thread and waits in the call or in the range, so it spans both.
-- phase: int_phase_ranges' phase of the issue point on its thread (optimizer, backward or forward).
-- step: the step (int_steps host range) holding the issue point; instances issued outside every step are left out.
-- process_group: the Process Group Name arg where the trace has it (NCCL). A gloo range (or an older NCCL kernel)
-- names no group. Each gloo process group runs its collectives on worker threads of its own (ProcessGroupGloo's
-- runLoop), so a worker thread serves one group: of the rank's groups (distributedInfo.pg_config), the one whose
-- other members each ran a collective of the same name and shapes overlapping in time (a collective ends on no
-- member before every member has started it) for most of the thread's collectives, then the one whose members
-- ended theirs closest to the thread's (a collective's members finish it together); scored twice, the second time
-- counting a member only where its own thread got the same group at the first, since in a job in lockstep the
-- collectives of other groups of the same shape run at the same time. Clocks of one host agree; across hosts this
-- needs clocks closer than a collective lasts. A gloo send or receive runs on the calling thread: it gets the
-- rank's group only where pg_config lists one, else null.
-- bytes: a kernel's collectives.msg_bytes; a gloo range's Σ elements of its tensors × bytes per element of their
-- Input type. peer_rank (send/recv): the call's peer (a Concrete Input: the peer's rank in the group) as a global
-- rank through the group's ranks, where the group is known.
-- source: torch 2.13 profiler output for gloo (tracelake/workloads.py), Optimizer.profile_hook_step, autograd engine
with

-- NCCL collectives from their kernels: with collective args, or (older traces) named by the kernel, whose stream
-- int_collectives takes for a process group: not a group, so no group here.
kernel_instances as (
    select
        collectives.run_id,
        collectives.trace_id,
        collectives.rank,
        activity.event_idx,
        'kernel' as source,
        collectives.name,
        if(collectives.source = 'kernel', collectives.process_group, null) as process_group,
        kernels.process_group_desc as arg_group_desc,
        try_cast(kernels.process_group_ranks as bigint[]) as arg_group_ranks,
        collectives.start_ns,
        collectives.end_ns,
        collectives.msg_bytes as bytes,
        launches.tid as issue_tid,
        launches.ts_ns as issue_ns,
        null::bigint as peer_group_rank
    from collectives
    join int_kernels_classified as activity
        on activity.trace_id = collectives.trace_id
        and activity.ts_ns = collectives.start_ns
        and activity.source_table = 'kernels'
        and activity.is_communication
    join kernels
        on kernels.trace_id = activity.trace_id
        and kernels.event_idx = activity.event_idx
    left join runtime_calls as launches
        on launches.trace_id = activity.trace_id
        and launches.correlation = activity.correlation
    where collectives.source in ('kernel', 'kernel_name')
    qualify row_number() over (
        partition by collectives.run_id, collectives.rank, collectives.process_group, collectives.seq
        order by activity.event_idx
    ) = 1
),

gloo_ranges as (
    select
        run_id, trace_id, rank, event_idx, tid, ts_ns, end_ns, input_types,
        substr(name, 6) as name,
        json(input_dims)::varchar as shapes,
        try_cast(input_dims as bigint[][]) as dims
    from annotations
    where starts_with(name, 'gloo:') and not on_device
),

c10d_calls as (
    select
        trace_id, tid, ts_ns, end_ns, concrete_inputs,
        coalesce(json(input_dims -> 0)::varchar, '') as shapes
    from cpu_ops
    where starts_with(name, 'c10d::')
),

issued_by_shape as (
    select gloo_ranges.trace_id, gloo_ranges.event_idx, c10d_calls.* exclude (trace_id, shapes)
    from gloo_ranges
    asof join c10d_calls
        on c10d_calls.trace_id = gloo_ranges.trace_id
        and c10d_calls.shapes = gloo_ranges.shapes
        and c10d_calls.ts_ns <= gloo_ranges.ts_ns
),

issued_by_time as (
    select gloo_ranges.trace_id, gloo_ranges.event_idx, c10d_calls.* exclude (trace_id, shapes)
    from gloo_ranges
    asof join c10d_calls
        on c10d_calls.trace_id = gloo_ranges.trace_id
        and c10d_calls.ts_ns <= gloo_ranges.ts_ns
),

issued as (
    select * from issued_by_shape
    union all by name
    select * from issued_by_time
    anti join issued_by_shape using (trace_id, event_idx)
),

-- Bytes per element of the profiler's Input type names.
gloo_sized as (
    select
        gloo_ranges.*,
        coalesce(list_sum(list_transform(
            range(len(dims)),
            i -> coalesce(list_product(dims[i + 1]), 1)::bigint * case lower(input_types ->> i::int)
                when 'double' then 8 when 'long int' then 8 when 'c10::complex<float>' then 8
                when 'c10::complex<double>' then 16
                when 'float' then 4 when 'int' then 4 when 'unsigned int' then 4
                when 'c10::half' then 2 when 'c10::bfloat16' then 2 when 'short int' then 2
                when 'unsigned short' then 2
                when 'signed char' then 1 when 'unsigned char' then 1 when 'bool' then 1
            end
        )), 0)::bigint as bytes
    from gloo_ranges
),

gloo_instances as (
    select
        gloo_sized.run_id,
        gloo_sized.trace_id,
        gloo_sized.rank,
        gloo_sized.event_idx,
        'gloo' as source,
        gloo_sized.name,
        null::varchar as process_group,
        null::varchar as arg_group_desc,
        null::bigint[] as arg_group_ranks,
        -- a send or receive: its call on the same thread holds the range's start
        case when issued.tid = gloo_sized.tid then least(gloo_sized.ts_ns, issued.ts_ns) else gloo_sized.ts_ns end
            as start_ns,
        case when issued.tid = gloo_sized.tid then greatest(gloo_sized.end_ns, issued.end_ns) else gloo_sized.end_ns end
            as end_ns,
        gloo_sized.bytes,
        coalesce(issued.tid, gloo_sized.tid) as issue_tid,
        coalesce(issued.ts_ns, gloo_sized.ts_ns) as issue_ns,
        case when gloo_sized.name in ('send', 'recv') then try_cast(issued.concrete_inputs ->> 2 as bigint) end
            as peer_group_rank
    from gloo_sized
    left join issued using (trace_id, event_idx)
),

instances as (
    select * from kernel_instances
    union all by name
    select * from gloo_instances
),

phased as (
    select
        instances.*,
        case
            when optimizer.end_ns > instances.issue_ns then 'optimizer'
            when backward.end_ns > instances.issue_ns then 'backward'
            else 'forward'
        end as phase
    from instances
    asof left join (select * from int_phase_ranges where phase = 'optimizer') as optimizer
        on optimizer.trace_id = instances.trace_id
        and optimizer.tid = instances.issue_tid
        and optimizer.ts_ns <= instances.issue_ns
    asof left join (select * from int_phase_ranges where phase = 'backward') as backward
        on backward.trace_id = instances.trace_id
        and backward.tid = instances.issue_tid
        and backward.ts_ns <= instances.issue_ns
),

stepped as (
    select phased.*, int_steps.step
    from phased
    asof join int_steps
        on int_steps.trace_id = phased.trace_id
        and int_steps.host_start_ns <= phased.issue_ns
    where phased.issue_ns < int_steps.host_end_ns
),

-- The rank's own process groups (distributedInfo.pg_config of its trace).
rank_groups as (
    select trace_id, process_group_name, process_group_desc, ranks, count(*) over (partition by trace_id) as groups
    from process_groups
),

gloo_collectives as (
    select run_id, trace_id, rank, event_idx, tid, name, shapes, ts_ns, end_ns
    from gloo_ranges
    where name not in ('send', 'recv')
),

-- Each gloo collective against each other member of each of its rank's groups.
group_members as (
    select * exclude (ranks), len(ranks) as group_size
    from (
        select
            gloo_collectives.*, rank_groups.process_group_name, rank_groups.ranks,
            unnest(rank_groups.ranks) as member
        from gloo_collectives
        join rank_groups using (trace_id)
    )
    where member != rank
),

-- The member's collectives of the same name and shapes that overlap this one: the latest started by the time it
-- ended and the first ended once it started (the member's part of it, or one of another group that happened to
-- run then), the one whose end is closer kept.
member_candidates as (
    select group_members.*, peer.trace_id as peer_trace_id, peer.tid as peer_tid, peer.ts_ns as peer_ts_ns,
        peer.end_ns as peer_end_ns
    from group_members
    asof join gloo_collectives as peer
        on peer.run_id = group_members.run_id
        and peer.rank = group_members.member
        and peer.name = group_members.name
        and peer.shapes = group_members.shapes
        and peer.ts_ns <= group_members.end_ns
    union all
    select group_members.*, peer.trace_id, peer.tid, peer.ts_ns, peer.end_ns
    from group_members
    asof join gloo_collectives as peer
        on peer.run_id = group_members.run_id
        and peer.rank = group_members.member
        and peer.name = group_members.name
        and peer.shapes = group_members.shapes
        and peer.end_ns >= group_members.ts_ns
),

member_matches as (
    select trace_id, tid, event_idx, process_group_name, group_size, peer_trace_id, peer_tid,
        abs(peer_end_ns - end_ns) as end_gap_ns
    from member_candidates
    where peer_ts_ns <= end_ns and peer_end_ns >= ts_ns
    qualify row_number() over (
        partition by trace_id, event_idx, process_group_name, member order by abs(peer_end_ns - end_ns)
    ) = 1
),

-- A thread's group at a first guess: the one whose members matched the most of its collectives (on average over the
-- members), then with the closest ends.
first_guess as (
    select trace_id, tid, process_group_name
    from member_matches
    group by trace_id, tid, process_group_name
    qualify row_number() over (
        partition by trace_id, tid
        order by count(*) / (any_value(group_size) - 1) desc, avg(end_gap_ns), process_group_name
    ) = 1
),

-- Per thread and group: the thread's collectives every other member matched, counting a member's match only where
-- the member's thread guessed the same group (a collective of another group that ran at the same time on the
-- member, same shapes as tensor-parallel peers have, drops out), and how far apart their ends were.
scores as (
    select trace_id, tid, process_group_name, count(*) as collectives, avg(end_gap_ns) as end_gap_ns
    from (
        select member_matches.trace_id, member_matches.tid, member_matches.event_idx,
            member_matches.process_group_name, max(member_matches.end_gap_ns) as end_gap_ns
        from member_matches
        join first_guess as peer_guess
            on peer_guess.trace_id = member_matches.peer_trace_id
            and peer_guess.tid = member_matches.peer_tid
            and peer_guess.process_group_name = member_matches.process_group_name
        group by all
        having count(*) = any_value(member_matches.group_size) - 1
    )
    group by all
),

thread_groups as (
    select trace_id, tid, process_group_name
    from scores
    qualify row_number() over (
        partition by trace_id, tid order by collectives desc, end_gap_ns, process_group_name
    ) = 1
),

-- A thread whose members' guesses all differ from its own keeps its first guess.
gloo_collective_groups as (
    select
        gloo_collectives.trace_id, gloo_collectives.event_idx,
        coalesce(thread_groups.process_group_name, first_guess.process_group_name) as process_group_name
    from gloo_collectives
    join first_guess using (trace_id, tid)
    left join thread_groups using (trace_id, tid)
),

grouped as (
    select
        stepped.* exclude (process_group),
        coalesce(stepped.process_group, by_thread.process_group_name, only_group.process_group_name) as process_group
    from stepped
    left join gloo_collective_groups as by_thread
        on by_thread.trace_id = stepped.trace_id
        and by_thread.event_idx = stepped.event_idx
        and stepped.source = 'gloo'
    left join rank_groups as only_group
        on only_group.trace_id = stepped.trace_id
        and only_group.groups = 1
        and stepped.source = 'gloo'
)

select
    grouped.run_id,
    grouped.trace_id,
    grouped.rank,
    grouped.step,
    grouped.event_idx,
    grouped.source,
    grouped.name,
    case when grouped.name in ('send', 'recv') then 'p2p' else 'collective' end as kind,
    grouped.process_group,
    coalesce(rank_groups.process_group_desc, grouped.arg_group_desc) as group_desc,
    coalesce(rank_groups.ranks, grouped.arg_group_ranks) as group_ranks,
    grouped.phase,
    grouped.start_ns,
    grouped.end_ns,
    grouped.bytes,
    grouped.issue_tid,
    grouped.issue_ns,
    grouped.peer_group_rank,
    coalesce(rank_groups.ranks, grouped.arg_group_ranks)[grouped.peer_group_rank + 1] as peer_rank
from grouped
left join rank_groups
    on rank_groups.trace_id = grouped.trace_id
    and rank_groups.process_group_name = grouped.process_group
