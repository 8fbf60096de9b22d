-- One row per step and category that the step's critical path runs through: the time on the path in that category
-- and its share of the path. Definition, as HTA 0.5.0's critical_path_analysis(rank, "ProfilerStep", instance)
-- and CPGraph.get_critical_path_breakdown(): the graph of one ProfilerStep#N holds the host ops and runtime calls
-- starting inside the step (with positive duration) and the kernels, memcpy and memset those runtime calls
-- launched (int_critical_path_graph builds it). Each event is a start and an end node. On a thread, consecutive op
-- boundaries in call order are joined by an edge of their time difference (cpu); top-level ops by a zero-weight
-- dependency; the wait inside a blocking
-- call (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, cudaEventQuery, cudaMemcpy[Async],
-- and their hip names) weighs 0. A kernel's start-end edge weighs its duration (communication for NCCL kernels,
-- gpu_compute otherwise). A kernel is entered by a launch edge from its runtime call's start (launch_sync: launch to
-- kernel start) when its stream was empty at the launch and still empty at its start (HTA's queue length 1, then 0)
-- and the previous kernel on the stream and any event it waits on ended before the launch; otherwise by an edge
-- from the previous kernel's end on its stream (idle: HTA's kernel-kernel delay). Syncs add zero-weight edges:
-- Stream Sync and Context Sync from the last kernel on the stream (all streams of the device) to the end of the
-- sync call; Event Sync and Stream Wait Event from the kernel launched last on the recorded stream before
-- cudaEventRecord to the end of cudaEventSynchronize, or to the start of the next kernel the waiting thread
-- launches on the waiting stream. The critical path is the longest path (transforms/critical_path.py); total_ns is
-- its time per category, path_ns the path's length, share_ratio = total_ns / path_ns. Categories with no time on
-- the path have no row. CPU-only steps get one 'cpu' row (the busiest thread's op time); steps without ops and
-- traces without ProfilerStep#N get none.
-- Deliberate differences: exact ns (HTA rounds to integer µs); every step, the last one too (HTA drops the last
-- ProfilerStep of a trace); events are nested per thread by time (ties: ends first, then the longer range first)
-- without HTA's annotations and python functions in the stack, which only change which event an edge is attributed
-- to; negative weights (clock skew: a kernel starting before its launch, overlapping kernels on a stream) count 0,
-- where HTA refuses a step with one below -1 µs; queue lengths and syncs are per (device, stream), HTA's per stream;
-- legacy `Operator`/`Runtime` traces and every launch name of int_launch_calls take part; the backward thread's
-- events join the forward thread's chain, as HTA after 0.5.0 merges them; on a tie between two
-- equally long paths the path stays on its thread or stream. Mapping of HTA's bound_by: cpu_bound = cpu,
-- gpu_compute_bound = gpu_compute, gpu_communication_bound = communication, gpu_kernel_launch_overhead and the
-- zero-weight sync/dependency edges = launch_sync, gpu_kernel_kernel_overhead = idle.
-- column: bound_by: what bounds this part of the path: cpu, gpu_compute, communication, launch_sync or idle
-- column: total_ns: time on the critical path in this category
-- column: share_ratio: total_ns / path_ns
-- column: path_ns: length of the step's critical path (the same on every row of the step)
-- column: step_ns: the ProfilerStep#N range's duration, for scale (the path can end after it, on the GPU)
-- grain: run_id, trace_id, step, bound_by
-- pieces: int_critical_path_graph
-- piece_name: 'the event graph of ProfilerStep#' || any_value(step) || ' of trace ' || any_value(trace_id)
-- source: holistictraceanalysis 0.5.0 hta/analyzers/critical_path_analysis.py (CPGraph, bound_by); its main branch
-- (f4d0062) CPGraph._construct_graph_from_call_stacks for the backward thread
with

categories as (
    select * from (values (0, 'cpu'), (1, 'gpu_compute'), (2, 'communication'), (3, 'launch_sync'), (4, 'idle'))
        as category (code, bound_by)
),

-- The graph of each step of this batch (int_critical_path_graph) as lists, one list per part and field.
graphs as (
    select
        piece, run_id, trace_id, step,
        list(lane) filter (where kind = 'host') as host_lane,
        list(event_idx) filter (where kind = 'host') as host_event_idx,
        list(ts_ns) filter (where kind = 'host') as host_ts_ns,
        list(end_ns) filter (where kind = 'host') as host_end_ns,
        list(blocking) filter (where kind = 'host') as host_blocking,
        coalesce(list(node) filter (where kind = 'device'), []) as node,
        coalesce(list(lane) filter (where kind = 'device'), []) as lane,
        coalesce(list(pos) filter (where kind = 'device'), []) as pos,
        coalesce(list(chain_weight) filter (where kind = 'device'), []) as chain_weight,
        coalesce(list(chain_category) filter (where kind = 'device'), []) as chain_category,
        coalesce(list(src) filter (where kind = 'edge'), []) as src,
        coalesce(list(dst) filter (where kind = 'edge'), []) as dst,
        coalesce(list(weight) filter (where kind = 'edge'), []) as weight,
        coalesce(list(category) filter (where kind = 'edge'), []) as category
    from int_critical_path_graph
    -- the batch the runner builds (every piece where nothing sets it)
    where piece between coalesce(getvariable('first_piece'), 0)
        and coalesce(getvariable('last_piece'), 9223372036854775807)
    group by piece, run_id, trace_id, step
    having count(*) filter (where kind = 'host') > 0
),

paths as (
    select
        run_id, trace_id, step,
        critical_path_split(
            host_lane, host_event_idx, host_ts_ns, host_end_ns, host_blocking,
            node, lane, pos, chain_weight, chain_category, src, dst, weight, category
        ) as totals
    from graphs
)

select
    paths.run_id,
    paths.trace_id,
    paths.step,
    categories.bound_by,
    steps.rank,
    paths.totals[categories.code + 1] as total_ns,
    paths.totals[categories.code + 1] / list_sum(paths.totals) as share_ratio,
    list_sum(paths.totals)::bigint as path_ns,
    steps.dur_ns as step_ns
from paths
cross join categories
join steps using (run_id, trace_id, step)
where paths.totals[categories.code + 1] > 0
