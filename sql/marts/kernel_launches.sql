-- One row per GPU event launched by cudaLaunchKernel, cudaLaunchKernelExC, the MTIA runFunction launch,
-- cudaMemcpyAsync or cudaMemsetAsync, joined to its runtime call by correlation id, as in HTA's launch stats.
-- launch_delay = max(0, gpu start - runtime end). cpu/gpu durations and delay mimic HTA 0.5.0's integer µs
-- (ceil start, floor end; ×1000 here), with sub-µs events whose rounded duration is -1 µs clamped to 0 (HTA
-- keeps -1 µs; within the 1 µs agreement). Timestamps are absolute ns of the HTA-rounded start. HTA's window
-- applies (last ProfilerStep dropped). exact_* columns give the same quantities from the unrounded ns times.
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
    where name in (
        'cudaLaunchKernel',
        'cudaLaunchKernelExC',
        'runFunction - job_prep_and_submit_for_execution',
        'cudaMemcpyAsync',
        'cudaMemsetAsync'
    )
)

select
    launches.run_id,
    launches.trace_id,
    launches.correlation,
    gpu.name as kernel_name,
    gpu.stream,
    gpu.base_ns + launches.ts_us * 1000 as cpu_ts_ns,
    greatest(launches.end_us - launches.ts_us, 0) * 1000 as cpu_dur_ns,
    gpu.base_ns + gpu.ts_us * 1000 as gpu_ts_ns,
    greatest(gpu.dur_us, 0) * 1000 as gpu_dur_ns,
    greatest(gpu.ts_us - launches.end_us, 0) * 1000 as launch_delay_ns,
    launches.rank,
    launches.name as runtime_name,
    gpu.cat as gpu_cat,
    launches.dur_ns as exact_cpu_dur_ns,
    gpu.dur_ns as exact_gpu_dur_ns,
    greatest(gpu.ts_ns - (launches.ts_ns + launches.dur_ns), 0) as exact_launch_delay_ns
from launches
join int_hta_gpu_events as gpu using (run_id, trace_id, correlation)
