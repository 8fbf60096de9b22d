-- One row per step of a trace: its wall time split by torch-tb-profiler's priority partition (Kernel > Memcpy >
-- Memset > Communication > Runtime > DataLoader > CPU Exec > Other, each role taking what higher ones left), so the
-- parts sum to total_ns = step end - step start exactly. Steps are int_steps' device-side ranges.
-- Communication counts the nccl:*/gloo:* op ranges and the kernels sharing their External id. Several windows of one
-- rank are kept apart by trace_id (their ProfilerStep numbers differ; traces without ProfilerStep number the steps
-- int_steps finds from 0). Without ProfilerStep a step covers the device work its launches queued (int_steps).
-- grain: run_id, rank, step, trace_id
-- differs: torch-tb-profiler: without ProfilerStep#N the steps are found from the trace (repeated top-level annotations, graph launches, else the whole trace: step_rule) and each reaches the device work its launches queued; tb_plugin's one step is the host ops' span, so the kernels that run after it fall outside (near 0 % GPU on a saturated inference trace).
-- differs: torch-tb-profiler: a kernel HTA calls communication (NCCL/RCCL) is Communication whatever op launched it; tb_plugin counts it so only when its External id is a nccl:*/gloo:* op's, so NCCL kernels of record_param_comms and ROCm's were computation to it.
-- differs: torch-tb-profiler: the DataLoader recorded as a user_annotation (enumerate(DataLoader)#...__next__, recent PyTorch) is DataLoader time, as when it is a cpu_op; tb_plugin 0.4.3 drops the annotation.
-- differs: torch-tb-profiler: tb_plugin reads each file alone; of traces claiming one rank over overlapping windows only the one with the most events is analysed (traces.in_analysis), and a trace of kernels and runtimes alone gets a step spanning them where tb_plugin reports a negative total.
-- source: torch-tb-profiler 0.4.3 Overview "Step Time Breakdown" (overall_parser.py create_from_range); ANCHORS.md §3.4
-- column: kernel_ns: step time whose top activity was kernel
-- column: memcpy_ns: step time whose top activity was memcpy
-- column: memset_ns: step time whose top activity was memset
-- column: communication_ns: step time whose top activity was communication
-- column: runtime_ns: step time whose top activity was runtime
-- column: dataloader_ns: step time whose top activity was dataloader
-- column: cpu_exec_ns: step time whose top activity was cpu exec
-- column: other_ns: step time whose top activity was other
-- column: total_ns: the step's wall time (the parts sum to it)
-- column: step_gpu_utilization_ratio: kernel_ns / total_ns, the share of this step a kernel runs in (gpu_metrics.gpu_utilization_ratio: the whole window's, per GPU)
-- column: step_rule: the rule that found the step (int_steps): profiler_step, annotation, graph_launch, whole_trace
with

parts as (
    select
        run_id,
        trace_id,
        step,
        coalesce(sum(seg_ns) filter (where top_role = 0), 0) as kernel_ns,
        coalesce(sum(seg_ns) filter (where top_role = 1), 0) as memcpy_ns,
        coalesce(sum(seg_ns) filter (where top_role = 2), 0) as memset_ns,
        coalesce(sum(seg_ns) filter (where top_role = 3), 0) as communication_ns,
        coalesce(sum(seg_ns) filter (where top_role = 4), 0) as runtime_ns,
        coalesce(sum(seg_ns) filter (where top_role = 5), 0) as dataloader_ns,
        coalesce(sum(seg_ns) filter (where top_role = 6), 0) as cpu_exec_ns,
        coalesce(sum(seg_ns) filter (where top_role = 7), 0) as other_ns
    from int_tb_step_segments
    group by run_id, trace_id, step
)

select
    int_steps.run_id,
    int_steps.rank,
    int_steps.step,
    coalesce(parts.kernel_ns, 0)::bigint as kernel_ns,
    coalesce(parts.memcpy_ns, 0)::bigint as memcpy_ns,
    coalesce(parts.memset_ns, 0)::bigint as memset_ns,
    coalesce(parts.communication_ns, 0)::bigint as communication_ns,
    coalesce(parts.runtime_ns, 0)::bigint as runtime_ns,
    coalesce(parts.dataloader_ns, 0)::bigint as dataloader_ns,
    coalesce(parts.cpu_exec_ns, 0)::bigint as cpu_exec_ns,
    coalesce(parts.other_ns, 0)::bigint as other_ns,
    int_steps.end_ns - int_steps.start_ns as total_ns,
    int_steps.trace_id,
    int_steps.start_ns,
    int_steps.end_ns,
    coalesce(parts.kernel_ns, 0) / nullif(int_steps.end_ns - int_steps.start_ns, 0) as step_gpu_utilization_ratio,
    int_steps.step_rule
from int_steps
left join parts using (run_id, trace_id, step)
