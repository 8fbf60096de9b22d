-- One row per GPU activity (kernels, gpu_memcpy, gpu_memset rows) with its HTA kernel type and whether it is
-- communication. is_communication is THE classification of communication kernels, which every model reads (through
-- this model's is_communication or kernel_type): a kernel that carries a collective's args (Seq, Comms Id,
-- Collective name: what the profiler records on the kernels of a c10d collective, whatever their name, as those of
-- NCCL's device API), and by name the collective libraries' kernels, named from the start of the
-- name (NCCL and RCCL ncclKernel_*/ncclDevKernel_* as HTA's ^nccl.*Kernel, RCCL rccl*, MSCCL msccl*, Huawei HCCL
-- hccl*/hcom_*), and custom collective kernels, named anywhere but in a Triton kernel (torch symmetric memory's
-- multimem/one_shot/two_shot_all_reduce, vLLM/SGLang cross_device_reduce, TensorRT-LLM/FlashInfer allreduce_fusion,
-- AMD quickreduce, DeepSeek's DeepEP (deep_ep::, dpsk::ep:: internode/intranode dispatch and combine), NVSHMEM,
-- MSCCL++, any kernel named all_reduce, all_gather, reduce_scatter or
-- all_to_all; an Inductor-fused all_gather_copy_in is a copy).
-- kernel_type as HTA: COMMUNICATION if communication, MEMORY if ^Memcpy|^Memset|^dma, COMPUTATION unless the
-- name matches ^.*Memcpy|^Memset|^.*Sync, otherwise OTHER (HTA's regexes are anchored at the start like re.match; as
-- LIKE, starts_with and contains they cost a third of the time, the same on any name without a line break, and
-- DuckDB runs them once per distinct name of a Parquet dictionary, where a regexp runs on every row).
-- Deliberate difference from HTA: HTA's COMMUNICATION is ^nccl.*Kernel only, so it counts RCCL's rccl*, HCCL and
-- custom all-reduce kernels as computation.
-- Stable interface read by other models: run_id, trace_id, rank, device, stream, name, cat, ts_ns, dur_ns, end_ns,
-- correlation, kernel_type, is_communication (then event_idx, external_id, source_table).
-- source: holistictraceanalysis 0.5.0 hta/utils/utils.py::get_kernel_type; see ANCHORS.md §2.2
with

gpu_activity as (
    select
        run_id, trace_id, rank, device, stream, name, cat, ts_ns, dur_ns, end_ns, correlation,
        event_idx, external_id, 'kernels' as source_table,
        seq is not null or comms_id is not null or collective_name is not null as has_collective_args
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
),

classified as (
    select
        *,
        coalesce(has_collective_args, false)
            or name like 'nccl%Kernel%' or starts_with(name, 'rccl') or starts_with(name, 'msccl') or name ilike 'hccl%'
            or starts_with(name, 'hcom_')
            or (
                not starts_with(name, 'triton_')
                and (
                    name ilike '%all_reduce%' or name ilike '%allreduce%' or name ilike '%all_gather%'
                    or name ilike '%allgather%' or name ilike '%reduce_scatter%' or name ilike '%reducescatter%'
                    or name ilike '%all_to_all%' or name ilike '%alltoall%' or contains(name, 'cross_device_reduce')
                    or contains(name, 'quickreduce') or contains(name, 'deep_ep::') or contains(name, 'dpsk::ep::')
                    or contains(name, 'nvshmem')
                    or contains(name, 'mscclpp')
                )
            ) as is_communication
    from gpu_activity
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
        when is_communication then 'COMMUNICATION'
        when starts_with(name, 'Memcpy') or starts_with(name, 'Memset') or starts_with(name, 'dma') then 'MEMORY'
        when not (contains(name, 'Memcpy') or starts_with(name, 'Memset') or contains(name, 'Sync'))
            then 'COMPUTATION'
        else 'OTHER'
    end as kernel_type,
    is_communication,
    event_idx,
    external_id,
    source_table
from classified
