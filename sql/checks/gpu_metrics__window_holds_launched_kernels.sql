-- Traces without ProfilerStep whose step window ends before a kernel their runtime calls launched: int_steps' found
-- steps cover the device work their launches queued, so every such kernel ends inside the window.
select gpu_metrics.run_id, gpu_metrics.trace_id, gpu_metrics.device, any_value(gpu_metrics.span_end_ns) as span_end_ns,
    max(kernels.end_ns) as last_kernel_end_ns
from gpu_metrics
join kernels using (run_id, trace_id, device)
semi join runtime_calls using (run_id, trace_id, correlation)
where gpu_metrics.step_rule <> 'profiler_step' and lower(kernels.cat) = 'kernel'
group by gpu_metrics.run_id, gpu_metrics.trace_id, gpu_metrics.device
having max(kernels.end_ns) > any_value(gpu_metrics.span_end_ns)
