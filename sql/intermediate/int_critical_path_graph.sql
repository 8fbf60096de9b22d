-- One row per part of a step's event graph, the critical_path mart's input (kind: host, device or edge); the graph
-- and its definition are the mart's (sql/marts/critical_path.sql, HTA 0.5.0's CPGraph): 'host' rows are the host
-- events starting inside the step (transforms/critical_path.py orders each thread's starts and ends into its
-- chain: a sort per thread in numpy costs less than a window over every boundary here), 'device' rows the device
-- nodes keyed by event and end (events are numbered uniquely within a trace) with the chain edge into each, 'edge'
-- rows the cross edges (launches, waits, syncs) between node keys. piece numbers the steps in time order, trace by
-- trace: the mart is built a batch of steps at a time.
-- grain: piece, kind, lane, event_idx, node, src, dst
-- source: holistictraceanalysis 0.5.0 hta/analyzers/critical_path_analysis.py (CPGraph); see sql/marts/critical_path.sql
-- column: piece: the step's number in the run, in time order
-- column: kind: host (a host event), device (a device node) or edge (a cross edge)
-- column: lane: the host event's thread, or the device node's stream, within the step (a hash)
-- column: blocking: the host event is a blocking call, whose end waits for the GPU
-- column: node: the device node's key, 2 * event_idx + 1 for its start, 2 * event_idx for its end
-- column: pos: the device node's place on its stream
-- column: chain_weight: the device chain edge's weight into the node, -1 where the node starts its chain
-- column: chain_category: that edge's category code (the mart's categories)
-- column: src: the cross edge's source node key
-- column: dst: the cross edge's destination node key
-- column: weight: the cross edge's weight
-- column: category: the cross edge's category code
with

blocking_calls as (
    select unnest([
        'cudaDeviceSynchronize', 'cudaStreamSynchronize', 'cudaEventSynchronize', 'cudaEventQuery', 'cudaMemcpy',
        'cudaMemcpyAsync', 'hipDeviceSynchronize', 'hipStreamSynchronize', 'hipEventSynchronize', 'hipEventQuery',
        'hipMemcpy', 'hipMemcpyAsync', 'hipMemcpyWithStream'
    ]) as name
),

host_events as (
    select run_id, trace_id, pid, tid, event_idx, ts_ns, dur_ns, end_ns, null::bigint as correlation, false as blocking
    from cpu_ops
    union all
    select
        run_id, trace_id, pid, tid, event_idx, ts_ns, dur_ns, end_ns, correlation,
        coalesce(name in (select name from blocking_calls), false) as blocking
    from runtime_calls
),

-- The backward pass usually runs on the autograd engine's thread, launching kernels while the forward thread waits
-- for it. As HTA (after 0.5.0) does, when one thread alone holds host events named *forward* and another alone
-- *autograd*, the backward thread's events join the forward thread's chain: else a backward thread starts its chain
-- from nothing in each step, the GPU work it queues is never on the path, and a step whose GPU runs behind reads
-- "100 % cpu" (a 2021 ResNet-50 trace: the path stopped at the host's 174 ms, its kernels ran to 188 ms).
pass_threads as (
    select
        run_id,
        trace_id,
        if(count(distinct tid) filter (where contains(name, 'forward')) = 1,
           any_value(tid) filter (where contains(name, 'forward')), null) as forward_tid,
        if(count(distinct tid) filter (where contains(name, 'autograd')) = 1,
           any_value(tid) filter (where contains(name, 'autograd')), null) as backward_tid
    from (
        select run_id, trace_id, tid, name from cpu_ops
        union all
        select run_id, trace_id, tid, name from annotations where not coalesce(on_device, false)
    )
    group by run_id, trace_id
),

-- The steps numbered in time order, trace by trace: the pieces critical_path is built a batch of at a time.
step_pieces as (
    select run_id, trace_id, step, ts_ns, end_ns, row_number() over (order by run_id, trace_id, ts_ns, step) as piece
    from steps
),

-- Each host event (of positive length) in the step whose stretch (from its start to the next step's) holds its
-- start: int_step_buckets' lookup, not a join of every event with every step of its trace.
host_bucketed as (
    select
        host_events.*,
        least((host_events.ts_ns - grids.first_ns) >> grids.shift, grids.last_bucket) as bucket
    from host_events
    join (select distinct trace_id, first_ns, shift, last_bucket from int_step_buckets) as grids using (trace_id)
    where host_events.dur_ns > 0
),

host_stretched as (
    select
        host_bucketed.* exclude (bucket),
        case
            when len(buckets.starts_ns) = 0 then buckets.before_step
            else coalesce(
                buckets.steps[len(list_filter(buckets.starts_ns, start_ns -> start_ns <= host_bucketed.ts_ns))],
                buckets.before_step
            )
        end as step
    from host_bucketed
    join int_step_buckets as buckets using (trace_id, bucket)
),

-- The events starting inside a step, as HTA clips one annotation instance: those of the step that started last
-- before them.
step_host as materialized (
    select
        steps.piece,
        steps.step,
        hash(
            host_stretched.trace_id, steps.step, 'thread', host_stretched.pid,
            if(host_stretched.tid = pass_threads.backward_tid,
               coalesce(pass_threads.forward_tid, host_stretched.tid), host_stretched.tid)
        ) as lane,
        host_stretched.* exclude (step)
    from host_stretched
    left join pass_threads using (run_id, trace_id)
    join step_pieces as steps using (run_id, trace_id, step)
    where host_stretched.ts_ns <= steps.end_ns
),

-- As in HTA, a launch has one device event: the last to start (of a CUDA graph launch's kernels).
device_events as (
    select
        run_id, trace_id, device, stream, event_idx, ts_ns, dur_ns, end_ns, correlation,
        if(kernel_type = 'COMMUNICATION', 2, 1) as category
    from int_kernels_classified
    where correlation is not null
    qualify row_number() over (partition by run_id, trace_id, correlation order by ts_ns desc, event_idx desc) = 1
),

-- Every launch of the trace with its device event, for the queue lengths and the event-record matching.
launches as materialized (
    select
        device_events.run_id, device_events.trace_id, device_events.device, device_events.stream,
        device_events.event_idx, device_events.ts_ns, runtime_calls.ts_ns as launch_ns,
        runtime_calls.pid, runtime_calls.tid
    from device_events
    join runtime_calls
        on runtime_calls.run_id = device_events.run_id
        and runtime_calls.trace_id = device_events.trace_id
        and runtime_calls.correlation = device_events.correlation
    where runtime_calls.name in (select name from int_launch_calls)
),

-- HTA's queue length: launches enqueued on a stream and not yet started, after each launch and each start.
queue_changes as (
    select run_id, trace_id, device, stream, event_idx, launch_ns as at_ns, 1 as change from launches
    union all
    select run_id, trace_id, device, stream, event_idx, ts_ns as at_ns, -1 as change from launches
),

queue_lengths as (
    select
        run_id, trace_id, event_idx, change,
        sum(change) over (
            partition by run_id, trace_id, device, stream order by at_ns, change, event_idx
        ) as queue_length
    from queue_changes
),

queue_at as (
    select
        run_id, trace_id, event_idx,
        any_value(queue_length) filter (where change = 1) as at_launch,
        any_value(queue_length) filter (where change = -1) as at_start
    from queue_lengths
    group by run_id, trace_id, event_idx
),

-- The device events of a step: those its runtime calls launched.
step_device as materialized (
    select
        step_host.piece, step_host.step, device_events.*,
        step_host.event_idx as runtime_idx, step_host.ts_ns as runtime_ns,
        lag(device_events.end_ns) over stream_order as previous_end_ns,
        row_number() over stream_order as pos
    from device_events
    join step_host
        on step_host.run_id = device_events.run_id
        and step_host.trace_id = device_events.trace_id
        and step_host.correlation = device_events.correlation
    window stream_order as (
        partition by device_events.run_id, device_events.trace_id, step_host.step, device_events.device,
            device_events.stream
        order by device_events.ts_ns, device_events.event_idx
    )
),

-- Event Sync and Stream Wait Event wait for the kernel launched last on the recorded stream before cudaEventRecord.
event_waits as (
    select
        gpu_syncs.run_id, gpu_syncs.trace_id, gpu_syncs.name, gpu_syncs.device, gpu_syncs.stream,
        gpu_syncs.correlation, gpu_syncs.wait_on_stream, record.ts_ns as record_ns
    from gpu_syncs
    join runtime_calls as record
        on record.run_id = gpu_syncs.run_id
        and record.trace_id = gpu_syncs.trace_id
        and record.correlation = gpu_syncs.wait_on_event_record_correlation
    where gpu_syncs.name in ('Event Sync', 'Stream Wait Event')
),

waited_on as (
    select event_waits.*, launches.event_idx as waited_idx
    from event_waits
    asof join launches
        on launches.run_id = event_waits.run_id
        and launches.trace_id = event_waits.trace_id
        and launches.device = event_waits.device
        and launches.stream = event_waits.wait_on_stream
        and launches.launch_ns <= event_waits.record_ns
),

-- Stream Wait Event: the next kernel the waiting thread launches on the waiting stream waits for it.
stream_waits as (
    select waited_on.run_id, waited_on.trace_id, waited_on.waited_idx, launches.event_idx as waiting_idx
    from waited_on
    join runtime_calls as wait_call
        on wait_call.run_id = waited_on.run_id
        and wait_call.trace_id = waited_on.trace_id
        and wait_call.correlation = waited_on.correlation
    asof join launches
        on launches.run_id = waited_on.run_id
        and launches.trace_id = waited_on.trace_id
        and launches.pid = wait_call.pid
        and launches.tid = wait_call.tid
        and launches.device = waited_on.device
        and launches.stream = waited_on.stream
        and launches.launch_ns >= wait_call.ts_ns
    where waited_on.name = 'Stream Wait Event'
),

-- Per kernel of a step: the kernel it waits on (in the same step), then which edge enters it.
entered as (
    select
        step_device.*,
        waited.end_ns as waited_end_ns,
        waited.event_idx as waited_idx,
        coalesce(queue_at.at_launch = 1 and queue_at.at_start = 0, false)
            and coalesce(step_device.previous_end_ns < step_device.runtime_ns, true)
            and coalesce(waited.end_ns < step_device.runtime_ns, true) as by_launch
    from step_device
    left join queue_at using (run_id, trace_id, event_idx)
    left join stream_waits
        on stream_waits.run_id = step_device.run_id
        and stream_waits.trace_id = step_device.trace_id
        and stream_waits.waiting_idx = step_device.event_idx
    left join step_device as waited
        on waited.run_id = stream_waits.run_id
        and waited.trace_id = stream_waits.trace_id
        and waited.step = step_device.step
        and waited.event_idx = stream_waits.waited_idx
),

device_nodes as (
    select
        piece, run_id, trace_id, step, event_idx, true as is_start,
        hash(trace_id, step, 'stream', device, stream) as lane, 2 * pos as pos,
        case
            when by_launch or previous_end_ns is null then -1
            when waited_end_ns >= previous_end_ns then -1
            else greatest(ts_ns - previous_end_ns, 0)
        end as chain_weight,
        4 as chain_category
    from entered
    union all
    select
        piece, run_id, trace_id, step, event_idx, false as is_start,
        hash(trace_id, step, 'stream', device, stream) as lane, 2 * pos + 1 as pos,
        greatest(dur_ns, 0) as chain_weight,
        category as chain_category
    from entered
),

-- Stream Sync and Context Sync wait for the last kernel started on the stream (the device's streams) before the
-- sync ended; Event Sync for the kernel its event record followed.
sync_calls as (
    select gpu_syncs.*, step_host.piece, step_host.step, step_host.event_idx as call_idx
    from gpu_syncs
    join step_host
        on step_host.run_id = gpu_syncs.run_id
        and step_host.trace_id = gpu_syncs.trace_id
        and step_host.correlation = gpu_syncs.correlation
    where gpu_syncs.name in ('Stream Sync', 'Context Sync')
),

synced_streams as (
    select distinct sync_calls.*, step_device.stream as synced_stream
    from sync_calls
    join step_device
        on step_device.run_id = sync_calls.run_id
        and step_device.trace_id = sync_calls.trace_id
        and step_device.step = sync_calls.step
        and step_device.device = sync_calls.device
        and (sync_calls.name = 'Context Sync' or step_device.stream = sync_calls.stream)
),

cross_edges as (
    select piece, run_id, trace_id, step, runtime_idx as src_idx, true as src_start, event_idx as dst_idx,
        true as dst_start, greatest(ts_ns - runtime_ns, 0) as weight, 3 as category
    from entered
    where by_launch
    union all
    select piece, run_id, trace_id, step, waited_idx, false, event_idx, true, 0, 3
    from entered
    where waited_idx is not null
    union all
    select synced_streams.piece, synced_streams.run_id, synced_streams.trace_id, synced_streams.step,
        last_kernel.event_idx, false,
        synced_streams.call_idx, false, 0, 3
    from synced_streams
    asof join step_device as last_kernel
        on last_kernel.run_id = synced_streams.run_id
        and last_kernel.trace_id = synced_streams.trace_id
        and last_kernel.step = synced_streams.step
        and last_kernel.device = synced_streams.device
        and last_kernel.stream = synced_streams.synced_stream
        and last_kernel.ts_ns <= synced_streams.end_ns
    union all
    select step_host.piece, step_host.run_id, step_host.trace_id, step_host.step, waited_on.waited_idx, false,
        step_host.event_idx, false, 0, 3
    from waited_on
    join step_host
        on step_host.run_id = waited_on.run_id
        and step_host.trace_id = waited_on.trace_id
        and step_host.correlation = waited_on.correlation
    where waited_on.name = 'Event Sync'
),

nodes_and_edges as (
    select piece, run_id, trace_id, step, 'host' as kind, lane, event_idx, ts_ns, end_ns, blocking
    from step_host
    union all by name
    select
        piece, run_id, trace_id, step, 'device' as kind, 2 * event_idx + is_start::bigint as node, lane, pos,
        chain_weight, chain_category
    from device_nodes
    union all by name
    select
        piece, run_id, trace_id, step, 'edge' as kind, 2 * src_idx + src_start::bigint as src,
        2 * dst_idx + dst_start::bigint as dst, weight, category
    from cross_edges
)

select
    piece, run_id, trace_id, step, kind, lane, event_idx, ts_ns, end_ns, blocking, node, pos, chain_weight,
    chain_category, src, dst, weight, category
from nodes_and_edges
