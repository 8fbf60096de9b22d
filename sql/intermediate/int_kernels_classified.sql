-- One row per GPU activity (kernels, gpu_memcpy, gpu_memset rows) with its HTA kernel type:
-- COMMUNICATION if the name matches ^nccl.*Kernel, MEMORY if ^Memcpy|^Memset|^dma, COMPUTATION unless the name
-- matches ^nccl.*Kernel|^.*Memcpy|^Memset|^.*Sync, otherwise OTHER (the regexes are anchored at the start like re.match;
-- as LIKE, starts_with and contains they cost a third of the time, the same on any name without a line break).
-- Stable interface read by other models: run_id, trace_id, rank, device, stream, name, cat, ts_ns, dur_ns, end_ns,
-- correlation, kernel_type (then event_idx, external_id, source_table).
-- source: holistictraceanalysis 0.5.0 hta/utils/utils.py::get_kernel_type; see ANCHORS.md §2.2
with

gpu_activity as (
    select
        run_id, trace_id, rank, device, stream, name, cat, ts_ns, dur_ns, end_ns, correlation,
        event_idx, external_id, 'kernels' as source_table
    from kernels
    union all by name
    select
        run_id, trace_id, rank, device, stream, name, cat, ts_ns, dur_ns, end_ns, correlation,
        event_idx, external_id, 'gpu_memcpy' as source_table
    from gpu_memcpy
    union all by name
    select
        run_id, trace_id, rank, device, stream, name, cat, ts_ns, dur_ns, end_ns, correlation,
        event_idx, external_id, 'gpu_memset' as source_table
    from gpu_memset
)

select
    run_id,
    trace_id,
    rank,
    device,
    stream,
    name,
    cat,
    ts_ns,
    dur_ns,
    end_ns,
    correlation,
    case
        when name like 'nccl%Kernel%' then 'COMMUNICATION'
        when starts_with(name, 'Memcpy') or starts_with(name, 'Memset') or starts_with(name, 'dma') then 'MEMORY'
        when not (contains(name, 'Memcpy') or starts_with(name, 'Memset') or contains(name, 'Sync'))
            then 'COMPUTATION'
        else 'OTHER'
    end as kernel_type,
    event_idx,
    external_id,
    source_table
from gpu_activity
