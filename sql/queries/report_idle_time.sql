-- One row per stream of a trace of the run $run_id with GPU work: its idle time by cause (idle_time, HTA's idle time
-- breakdown) and the queue of launched events waiting on it (queue_length_summary).
-- grain: run_id, trace_id, stream
-- source: HTA 0.5.0 get_idle_time_breakdown, get_queue_length_summary; ANCHORS.md §2.3
-- column: host_wait_ns: idle because the host enqueued the next event late
-- column: kernel_wait_ns: short gaps between kernels
-- column: other_ns: other idle gaps
-- column: idle_ns: host_wait_ns + kernel_wait_ns + other_ns
-- column: host_wait_ratio: host_wait_ns / idle_ns
-- column: mean_queue_length: mean launched events waiting on the stream (null: no queue series)
-- column: max_queue_length: longest queue
select
    idle_time.run_id,
    idle_time.trace_id,
    idle_time.stream,
    idle_time.rank,
    idle_time.host_wait_ns,
    idle_time.kernel_wait_ns,
    idle_time.other_ns,
    idle_time.host_wait_ns + idle_time.kernel_wait_ns + idle_time.other_ns as idle_ns,
    idle_time.host_wait_ns / nullif(idle_time.host_wait_ns + idle_time.kernel_wait_ns + idle_time.other_ns, 0)
        as host_wait_ratio,
    queue.mean_length as mean_queue_length,
    queue.max_length as max_queue_length
from idle_time
left join queue_length_summary as queue using (run_id, trace_id, stream)
where idle_time.run_id = $run_id
order by idle_time.rank, idle_time.trace_id, idle_time.stream
