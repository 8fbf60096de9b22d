-- One row per rank and step of a pipeline-parallel job (a rank that sends or receives point-to-point in the step):
-- its stage, how long it computes, how long it is held in send/receive, how much of that is waiting for the
-- neighbouring stage, and its bubble against the schedule's ideal. Sends and receives are int_comm_instances' p2p
-- rows (gloo: the c10d call and its gloo:send/gloo:recv range; the peer is the call's, as a global rank).
-- stage: the pipeline is the chain the ranks' sends and receives make; its first stage is the rank whose first
-- send/receive of the step is a send (the others first receive activations), and each other rank is one stage
-- after the peer of its first receive. stages: ranks on the chain. microbatches: the first stage's sends in the
-- step (one activation per micro-batch).
-- compute_ns: the step's time under computation (int_compute_busy: the device's kernels where the trace has them,
-- else the host's computing ops). send_recv_ns: the step's time in sends and receives not under computation.
-- wait_ns: the part of that spent in a receive before the neighbour's matching send started (the k-th receive
-- from a peer in the step matches the peer's k-th send to this rank; ranks' clocks are taken as one, as for
-- every cross-rank table). bubble_ratio = 1 - compute_ns / step_ns (step_ns: int_steps). ideal_bubble_ratio =
-- (stages - 1) / (microbatches + stages - 1), the idle share of each stage in GPipe and 1F1B with one stage per
-- rank and equal micro-batch times (interleaved schedules idle less); null off a consistent chain.
-- grain: run_id, rank, step
-- source: the bubble (p-1)/(m+p-1) of GPipe (Huang et al. 2019) and 1F1B (Narayanan et al. 2021)
-- column: stage: the rank's stage, 0 first (null when it is off the chain)
-- column: compute_ns: time computing in the step
-- column: send_recv_ns: time in sends and receives not under computation
-- column: wait_ns: time in receives before the matching send on the neighbour started, not under computation
-- column: bubble_ratio: share of the step not computing
-- column: ideal_bubble_ratio: (stages - 1) / (microbatches + stages - 1)
-- column: stages: pipeline stages (ranks on the chain)
-- column: microbatches: micro-batches in the step (the first stage's sends)
-- column: step_ns: the step's duration (int_steps)
with recursive

p2p as (
    select *, row_number() over (partition by trace_id, step, name, peer_rank order by start_ns, event_idx) as nth
    from int_comm_instances
    where kind = 'p2p'
),

firsts as (
    select
        run_id,
        step,
        rank,
        arg_min(name, start_ns) as first_op,
        arg_min(peer_rank, start_ns) filter (where name = 'recv') as upstream_rank,
        count(*) filter (where name = 'send') as sends
    from p2p
    group by all
),

chain(run_id, step, rank, stage) as (
    select run_id, step, rank, 0
    from firsts
    where first_op = 'send'
    union all
    select next.run_id, next.step, next.rank, chain.stage + 1
    from chain
    join firsts as next
        on next.run_id = chain.run_id
        and next.step = chain.step
        and next.upstream_rank = chain.rank
        and next.first_op = 'recv'
    where chain.stage < 1024
),

pipelines as (
    select
        chain.run_id,
        chain.step,
        count(*) as stages,
        any_value(heads.sends) filter (where chain.stage = 0) as microbatches,
        count(*) = count(distinct chain.rank) and count(*) filter (where chain.stage = 0) = 1 as consistent
    from chain
    join firsts as heads using (run_id, step, rank)
    group by all
),

-- Each receive's wait: from its start until the matching send on the peer started.
waits as (
    select recv.trace_id, recv.step, recv.start_ns, least(recv.end_ns, send.start_ns) as end_ns
    from p2p as recv
    join p2p as send
        on send.run_id = recv.run_id
        and send.step = recv.step
        and send.rank = recv.peer_rank
        and send.peer_rank = recv.rank
        and send.name = 'send'
        and send.nth = recv.nth
    where recv.name = 'recv' and send.start_ns > recv.start_ns
),

-- The steps of ranks that send or receive, and which side of int_compute_busy computes there.
windows as (
    select
        int_steps.*,
        int_steps.end_ns - int_steps.start_ns as step_ns,
        exists (
            select 1 from int_compute_busy as busy where busy.trace_id = int_steps.trace_id and busy.on_device
        ) as on_device
    from int_steps
    semi join p2p using (trace_id, step)
),

-- Sends/receives and waits of the step, clipped to it and merged, and the step itself.
spans as (
    select 'step' as kind, trace_id, step, start_ns, end_ns
    from windows
    union all
    select 'send_recv' as kind, p2p.trace_id, p2p.step, greatest(p2p.start_ns, windows.start_ns) as start_ns,
        least(p2p.end_ns, windows.end_ns) as end_ns
    from p2p
    join windows using (trace_id, step)
    union all
    select 'wait' as kind, waits.trace_id, waits.step, greatest(waits.start_ns, windows.start_ns) as start_ns,
        least(waits.end_ns, windows.end_ns) as end_ns
    from waits
    join windows using (trace_id, step)
),

flagged as (
    select
        *,
        coalesce(
            start_ns > max(end_ns) over (
                partition by kind, trace_id, step order by start_ns, end_ns
                rows between unbounded preceding and 1 preceding
            ),
            true
        ) as opens
    from spans
    where end_ns > start_ns
),

islands as (
    select *, sum(opens::int) over (partition by kind, trace_id, step order by start_ns, end_ns) as island
    from flagged
),

merged as (
    select kind, trace_id, step, min(start_ns) as start_ns, max(end_ns) as end_ns
    from islands
    group by kind, trace_id, step, island
),

-- Of the step and its merged spans, the time under computation. int_compute_busy's intervals are disjoint: the time
-- computing before an instant is busy_before_ns of the last interval starting at or before it plus that interval's
-- part before it, and a span's time under computation is that at its end less that at its start.
hidden as (
    select
        merged.kind,
        merged.trace_id,
        merged.step,
        sum(
            coalesce(at_end.busy_before_ns + least(merged.end_ns, at_end.end_ns) - at_end.start_ns, 0)
            - coalesce(at_start.busy_before_ns + least(merged.start_ns, at_start.end_ns) - at_start.start_ns, 0)
        ) as hidden_ns
    from merged
    join windows using (trace_id, step)
    asof left join int_compute_busy as at_end
        on at_end.trace_id = merged.trace_id
        and at_end.on_device = windows.on_device
        and at_end.start_ns <= merged.end_ns
    asof left join int_compute_busy as at_start
        on at_start.trace_id = merged.trace_id
        and at_start.on_device = windows.on_device
        and at_start.start_ns <= merged.start_ns
    group by all
),

exposed as (
    select kind, trace_id, step, sum(end_ns - start_ns) - coalesce(any_value(hidden.hidden_ns), 0) as exposed_ns
    from merged
    left join hidden using (kind, trace_id, step)
    group by all
)

select
    windows.run_id,
    windows.rank,
    windows.step,
    chain.stage,
    coalesce(computed.hidden_ns, 0)::bigint as compute_ns,
    coalesce(send_recv.exposed_ns, 0)::bigint as send_recv_ns,
    coalesce(wait.exposed_ns, 0)::bigint as wait_ns,
    1 - coalesce(computed.hidden_ns, 0) / nullif(windows.step_ns, 0) as bubble_ratio,
    case when pipelines.consistent and pipelines.microbatches > 0 and pipelines.stages > 1
        then (pipelines.stages - 1) / (pipelines.microbatches + pipelines.stages - 1)
    end as ideal_bubble_ratio,
    pipelines.stages,
    pipelines.microbatches,
    windows.step_ns
from windows
left join chain
    on chain.run_id = windows.run_id
    and chain.step = windows.step
    and chain.rank = windows.rank
left join pipelines
    on pipelines.run_id = windows.run_id
    and pipelines.step = windows.step
left join hidden as computed
    on computed.trace_id = windows.trace_id
    and computed.step = windows.step
    and computed.kind = 'step'
left join exposed as send_recv
    on send_recv.trace_id = windows.trace_id
    and send_recv.step = windows.step
    and send_recv.kind = 'send_recv'
left join exposed as wait
    on wait.trace_id = windows.trace_id
    and wait.step = windows.step
    and wait.kind = 'wait'
