-- One row per trace with GPU activity: how much of the communication time is hidden under computation, as HTA
-- computes it. Communication and computation kernels are each merged into busy intervals (union over all
-- streams); overlap_ns is the time both are busy; communication_ns is the merged communication time;
-- overlap_ratio = overlap_ns / communication_ns (0 when they never overlap; null when the trace has no communication
-- kernels, where HTA gives NaN).
-- Mimics HTA 0.5.0 exactly: integer-µs timestamps (×1000 here) and HTA's window (see int_hta_window).
-- grain: run_id, trace_id
-- source: holistictraceanalysis 0.5.0 hta/analyzers/communication_analysis.py::get_comm_comp_overlap; see ANCHORS.md §2.3
-- column: overlap_ns: communication time under computation
-- column: communication_ns: merged communication-kernel time
-- column: overlap_ratio: overlap_ns / communication_ns
with

overlap as (
    -- Time when both computation (bit 1) and communication (bit 2) kernels run, whatever memcpy does.
    select run_id, trace_id, sum(length_us) filter (where running_types & 3 = 3) as overlap_us
    from int_hta_type_segments
    group by run_id, trace_id
),

communication as (
    select run_id, trace_id, sum(end_us - ts_us) as communication_us
    from int_hta_merged_intervals
    where kernel_set = 'COMMUNICATION'
    group by run_id, trace_id
),

traces_with_gpu as (
    select run_id, trace_id, any_value(rank) as rank
    from int_hta_merged_intervals
    where kernel_set = 'ALL'
    group by run_id, trace_id
)

select
    traces_with_gpu.run_id,
    traces_with_gpu.trace_id,
    cast(coalesce(overlap.overlap_us, 0) * 1000 as bigint) as overlap_ns,
    cast(coalesce(communication.communication_us, 0) * 1000 as bigint) as communication_ns,
    coalesce(overlap.overlap_us, 0) / nullif(communication.communication_us, 0) as overlap_ratio,
    traces_with_gpu.rank
from traces_with_gpu
left join overlap using (run_id, trace_id)
left join communication using (run_id, trace_id)
