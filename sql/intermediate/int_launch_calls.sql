-- The runtime calls that launch device work: CUDA runtime and driver kernel launches, CUDA graph launches (one
-- call, several kernels sharing its correlation), async memcpy/memset, their HIP equivalents, and MTIA's
-- runFunction: HTA 0.5.0's runtime launch list plus the graph and launch variants it lacks. One row per name.
-- source: holistictraceanalysis 0.5.0 hta/common/trace_symbol_table.py (get_runtime_launch_events_query)
-- materialized: view
select unnest([
    'cudaLaunchKernel', 'cudaLaunchKernelExC', 'cuLaunchKernel', 'cuLaunchKernelEx',
    'cudaLaunchCooperativeKernel', 'cudaGraphLaunch', 'cuGraphLaunch',
    'cudaMemcpyAsync', 'cudaMemsetAsync',
    'hipLaunchKernel', 'hipExtLaunchKernel', 'hipModuleLaunchKernel', 'hipExtModuleLaunchKernel', 'hipGraphLaunch',
    'hipMemcpyAsync', 'hipMemsetAsync', 'hipMemcpyWithStream',
    'runFunction - job_prep_and_submit_for_execution'
]) as name
