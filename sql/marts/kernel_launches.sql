-- One row per launch call (correlation id) that started device work: kernel launches (CUDA runtime and driver,
-- HIP, MTIA's runFunction), CUDA/HIP graph launches, and async memcpy/memset, joined to their GPU events as in HTA's
-- launch stats. A graph launch runs several kernels under one correlation: kernel_name and stream are its first
-- kernel's, gpu_ts its first start, gpu_dur the span to its last end, kernel_count how many ran (1 for the rest).
-- launch_delay = max(0, first gpu start - runtime end). cpu/gpu durations and delay mimic HTA 0.5.0's integer µs
-- (ceil start, floor end; ×1000 here), with sub-µs events whose rounded duration is -1 µs clamped to 0 (HTA
-- keeps -1 µs; within the 1 µs agreement). Timestamps are absolute ns of the HTA-rounded start. HTA's window
-- applies (last ProfilerStep dropped). exact_* columns give the same quantities from the unrounded ns times.
-- Deliberate difference: HTA 0.5.0's launch stats know only cudaLaunchKernel(ExC), runFunction and
-- cudaMemcpyAsync/cudaMemsetAsync; runtime_name tells the added launch kinds apart.
-- grain: run_id, trace_id, correlation
-- source: holistictraceanalysis 0.5.0 hta/analyzers/cuda_kernel_analysis.py::cuda_kernel_launch_stats; see ANCHORS.md §2.3
-- column: cpu_ts_ns: runtime call start (HTA-rounded)
-- column: cpu_dur_ns: runtime call duration
-- column: gpu_ts_ns: GPU event start
-- column: gpu_dur_ns: GPU event duration
-- column: launch_delay_ns: GPU start minus runtime call end, at least 0
-- column: runtime_name: the launching runtime call
-- column: gpu_cat: kernel, gpu_memcpy or gpu_memset
-- column: exact_cpu_dur_ns: cpu_dur_ns from unrounded times
-- column: exact_gpu_dur_ns: gpu_dur_ns from unrounded times
-- column: exact_launch_delay_ns: launch_delay_ns from unrounded times
with

launches as (
    select *
    from int_hta_runtime
    where name in (select name from int_launch_calls)
),

-- Per launch, its first GPU event (earliest start, then trace order) by number: an aggregate's strings and structs
-- are held in memory whatever its buffer (a struct key took ~130 bytes per GPU event outside it), so the order is one
-- HUGEINT and the names come from a join.
device_spans as (
    select
        run_id,
        trace_id,
        correlation,
        arg_min(event_idx, (ts_ns::hugeint << 64) + event_idx) as first_idx,
        any_value(base_ns) as base_ns,
        min(ts_us) as ts_us,
        max(end_us) as end_us,
        min(ts_ns) as ts_ns,
        max(end_ns) as end_ns,
        count(*) as kernel_count
    from int_hta_gpu_events
    where correlation is not null
    group by run_id, trace_id, correlation
),

device_work as (
    select device_spans.*, first.name as kernel_name, first.stream, first.cat as gpu_cat
    from device_spans
    join int_hta_gpu_events as first
        on first.trace_id = device_spans.trace_id
        and first.event_idx = device_spans.first_idx
)

select
    launches.run_id,
    launches.trace_id,
    launches.correlation,
    gpu.kernel_name,
    gpu.stream,
    gpu.base_ns + launches.ts_us * 1000 as cpu_ts_ns,
    greatest(launches.end_us - launches.ts_us, 0) * 1000 as cpu_dur_ns,
    gpu.base_ns + gpu.ts_us * 1000 as gpu_ts_ns,
    greatest(gpu.end_us - gpu.ts_us, 0) * 1000 as gpu_dur_ns,
    greatest(gpu.ts_us - launches.end_us, 0) * 1000 as launch_delay_ns,
    launches.rank,
    launches.name as runtime_name,
    gpu.gpu_cat,
    gpu.kernel_count,
    launches.dur_ns as exact_cpu_dur_ns,
    gpu.end_ns - gpu.ts_ns as exact_gpu_dur_ns,
    greatest(gpu.ts_ns - (launches.ts_ns + launches.dur_ns), 0) as exact_launch_delay_ns
from launches
join device_work as gpu using (run_id, trace_id, correlation)
