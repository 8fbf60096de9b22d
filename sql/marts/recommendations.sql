-- One row per rule that fires on a trace: the metric it reads, its value, the threshold it crossed, a severity and
-- one sentence of advice. source 'tb_plugin': torch-tb-profiler 0.4.3's Overview "Performance Recommendation" rules
-- with its thresholds (RunProfileData.analyze): DataLoader > 5 % and communication > 10 % of the step time (means
-- over steps, from step_breakdown), a GPU under 50 % utilization (gpu_metrics), tensor cores unused (no kernel time
-- on tensor/matrix-core kernels, kernel_stats.uses_tensor_cores, NVIDIA and AMD) while TC-eligible ops launch
-- kernels on a device of compute capability >= 7 (eligible ops: tb_plugin's TC_OP_Allowlist; their kernels found by
-- External id, so the innermost op owns a kernel, as tb_plugin's bottom-most eligible op does; deliberate
-- differences: tb_plugin 0.4.3 links kernels to ops only through the legacy `Runtime` category, so on modern traces
-- (cuda_runtime) its eligible share is 0 and the rule never fires; we link them in every format; and the advice,
-- autocast to FP16/BF16, is not given where half or more of the eligible ops' kernel time (of ops recorded with
-- their dtypes) is in ops whose first input is half, bfloat16, FP8, FP4 or 8-bit already, whatever their kernels
-- are named), peak allocated memory > 90 % of a GPU's totalGlobalMem, DataParallel
-- over several devices, DDP without an NCCL op on a device of compute capability >= 3.5. source 'tracelake': rules
-- from the diagnosis tables: a straggler rank (stragglers.is_straggler, with the steps it held the others back
-- at and why), a rank that skipped collectives its group ran (straggler_steps.missed_collectives), warmup steps
-- inside the window (step_health.is_warmup), a dead window (the steps' first-op gaps over 10 % of their time) and launch-bound steps
-- (half or more of the steps that launch device work have a mean launch-to-start delay under 20 µs: the device
-- queue runs empty and waits for the host), a process group whose exposed communication is over 10 % of the step
-- time (comm_by_group; the group exposing most), a pipeline stage idling over 10 points of the step more than its
-- schedule's ideal bubble (pipeline_stages).
-- grain: run_id, trace_id, rule
-- differs: torch-tb-profiler: kernels are linked to ops through every runtime call (cudaLaunchKernel and the driver API), where tb_plugin 0.4.3 reads only the legacy Runtime category, so its tensor_cores_unused rule never fires on a modern trace.
-- source: torch-tb-profiler 0.4.3 profiler/data.py (RunProfileData.analyze, _analyze_distributed_metrics,
-- _analyze_gpu_metrics), tensor_cores_parser.py, tensor_core.py; stragglers, step_health, comm_by_group, pipeline_stages
with

trace_ranks as (
    select run_id, trace_id, rank from traces where status != 'failed'
),

step_shares as (
    select
        run_id,
        trace_id,
        any_value(rank) as rank,
        sum(dataloader_ns) / nullif(sum(total_ns), 0) as dataloader_ratio,
        sum(communication_ns) / nullif(sum(total_ns), 0) as communication_ratio
    from step_breakdown
    group by run_id, trace_id
),

dataloader_rule as (
    select
        run_id, trace_id, rank, 'dataloader_share' as rule, 'dataloader_ratio' as metric, dataloader_ratio as metric_value,
        0.05 as threshold, 'warning' as severity, 'tb_plugin' as source,
        format('{:.1f}% of the step time is in the DataLoader: set num_workers on the DataLoader to load data in '
            || 'worker processes.', dataloader_ratio * 100) as message
    from step_shares
    where dataloader_ratio > 0.05
),

communication_rule as (
    select
        run_id, trace_id, rank, 'communication_share', 'communication_ratio', communication_ratio, 0.1, 'warning',
        'tb_plugin',
        format('{:.1f}% of the step time is in communication: try gradient compression (DDP comm hooks), gradient '
            || 'accumulation or a larger batch size, minding that a larger effective batch may hurt convergence.',
            communication_ratio * 100)
    from step_shares
    where communication_ratio > 0.1
),

gpu_utilization_rule as (
    select
        run_id, trace_id, any_value(rank), 'low_gpu_utilization', 'gpu_utilization_ratio',
        min(gpu_utilization_ratio), 0.5, 'warning', 'tb_plugin',
        format('GPU {} below 50% utilization (lowest {:.1f}%): try a larger batch size, minding that it may affect '
            || 'the speed and stability of convergence.',
            string_agg(device::varchar, ', ' order by device), min(gpu_utilization_ratio) * 100)
    from gpu_metrics
    where gpu_utilization_ratio < 0.5
    group by run_id, trace_id
),

first_device as (
    select run_id, trace_id, arg_min(compute_major, device) as compute_major
    from devices
    group by run_id, trace_id
),

tc_kernel_time as (
    select
        run_id, trace_id, coalesce(sum(total_ns) filter (where uses_tensor_cores), 0) / nullif(sum(total_ns), 0) as tc_used_ratio
    from kernel_stats
    group by run_id, trace_id
),

tc_eligible_ops as (
    select unnest([
        'aten::_convolution', 'aten::conv1d', 'aten::conv2d', 'aten::conv3d', 'aten::conv_tbc',
        'aten::conv_transpose1d', 'aten::conv_transpose2d', 'aten::conv_transpose3d', 'aten::convolution',
        'aten::cudnn_convolution', 'aten::cudnn_convolution_transpose', 'aten::prelu', 'aten::addmm', 'aten::addmv',
        'aten::addr', 'aten::matmul', 'aten::mm', 'aten::mv', 'aten::linear', 'aten::addbmm', 'aten::baddbmm',
        'aten::bmm', 'aten::chain_matmul', 'aten::linalg_multi_dot', 'aten::_thnn_fused_lstm_cell',
        'aten::_thnn_fused_gru_cell', 'aten::lstm_cell', 'aten::gru_cell', 'aten::rnn_tanh_cell',
        'aten::rnn_relu_cell', 'CudnnConvolutionBackward', 'BmmBackward0',
        'aten::cudnn_convolution_transpose_backward', 'CudnnConvolutionTransposeBackward', 'MmBackward',
        'aten::cudnn_convolution_backward_weight', 'aten::addmm_', 'AddmvBackward', 'MvBackward',
        'aten::cudnn_convolution_transpose_backward_weight', 'aten::cudnn_convolution_transpose_backward_input',
        'AddmmBackward', 'aten::cudnn_convolution_backward_input', 'AddbmmBackward', 'aten::cudnn_convolution_backward'
    ]) as name
),

op_kernels as (
    select
        kernels.run_id,
        kernels.trace_id,
        kernels.dur_ns,
        cpu_ops.name in (select name from tc_eligible_ops) as tc_eligible,
        -- the op's first input's dtype: half, bfloat16, FP8, FP4 and 8-bit integer GEMMs are already low precision
        lower(json_extract_string(cpu_ops.input_types, '$[0]')) as dtype
    from kernels
    join cpu_ops using (run_id, trace_id, external_id)
),

tc_eligible_time as (
    select
        run_id,
        trace_id,
        coalesce(sum(dur_ns) filter (where tc_eligible), 0) / nullif(sum(dur_ns), 0) as tc_eligible_ratio,
        sum(dur_ns) filter (
            where tc_eligible and (
                dtype in ('c10::half', 'c10::bfloat16', 'signed char', 'unsigned char')
                or dtype like 'c10::float8%' or dtype like 'c10::float4%'
            )
        ) / nullif(sum(dur_ns) filter (where tc_eligible and dtype is not null and dtype != ''), 0)
            as low_precision_ratio
    from op_kernels
    group by run_id, trace_id
),

tensor_core_rule as (
    select
        trace_ranks.run_id, trace_ranks.trace_id, trace_ranks.rank, 'tensor_cores_unused',
        'tc_eligible_ops_kernel_ratio', tc_eligible_time.tc_eligible_ratio, 0.0, 'warning', 'tb_plugin',
        format('{}% of kernel time is launched by tensor-core eligible ops, yet no kernel uses tensor cores: enable '
            || 'automatic mixed precision (torch.autocast) to run them in FP16/BF16.',
            round(tc_eligible_time.tc_eligible_ratio * 100)::bigint)
    from trace_ranks
    join first_device using (run_id, trace_id)
    join tc_kernel_time using (run_id, trace_id)
    join tc_eligible_time using (run_id, trace_id)
    where first_device.compute_major >= 7
        and tc_kernel_time.tc_used_ratio = 0
        and tc_eligible_time.tc_eligible_ratio > 0
        -- the advice is autocast: never where the eligible ops' kernel time is mostly in low-precision ops already
        and coalesce(tc_eligible_time.low_precision_ratio, 0) < 0.5
),

memory_use as (
    select
        memory_peaks.run_id, memory_peaks.trace_id, memory_peaks.rank, memory_peaks.device,
        memory_peaks.peak_allocated_bytes / devices.total_global_mem_bytes as memory_ratio,
        devices.total_global_mem_bytes
    from memory_peaks
    join devices using (run_id, trace_id, device)
    where memory_peaks.device >= 0 and devices.total_global_mem_bytes > 0
),

memory_rule as (
    select
        run_id, trace_id, any_value(rank), 'memory_near_limit', 'peak_memory_ratio',
        max(memory_ratio), 0.9, 'critical', 'tb_plugin',
        format('Peak allocated memory is {:.1f}% of the {:.1f} GB on GPU {}: use gradient checkpointing or automatic '
            || 'mixed precision to make room, for example for a larger batch.',
            max(memory_ratio) * 100, arg_max(total_global_mem_bytes, memory_ratio) / 1073741824,
            arg_max(device, memory_ratio))
    from memory_use
    where memory_ratio > 0.9
    group by run_id, trace_id
),

wrapper_ops as (
    select run_id, trace_id, name from cpu_ops
    where name in ('DataParallel.forward', 'DistributedDataParallel.forward')
    union
    select run_id, trace_id, name from annotations
    where name in ('DataParallel.forward', 'DistributedDataParallel.forward') and not on_device
),

device_use as (
    select run_id, trace_id, count(distinct device) as devices_used
    from int_kernels_classified
    group by run_id, trace_id
),

data_parallel_rule as (
    select
        trace_ranks.run_id, trace_ranks.trace_id, trace_ranks.rank, 'data_parallel', 'devices_used',
        device_use.devices_used, 1, 'warning', 'tb_plugin',
        'DataParallel drives several GPUs from one process: use DistributedDataParallel instead, one process per GPU.'
    from trace_ranks
    join device_use using (run_id, trace_id)
    where device_use.devices_used > 1
        and exists (
            from wrapper_ops
            where wrapper_ops.trace_id = trace_ranks.trace_id
                and wrapper_ops.run_id = trace_ranks.run_id
                and wrapper_ops.name = 'DataParallel.forward'
        )
),

nccl_ops as (
    select run_id, trace_id, count(*) filter (where comm_lib = 'nccl') as nccl_ops
    from int_tb_comm_ops
    group by run_id, trace_id
),

cuda_capable as (
    select distinct run_id, trace_id
    from devices
    where compute_major + compute_minor / 10 >= 3.5
),

backend_rule as (
    select
        trace_ranks.run_id, trace_ranks.trace_id, trace_ranks.rank, 'non_nccl_backend', 'nccl_ops',
        coalesce(nccl_ops.nccl_ops, 0), 1, 'warning', 'tb_plugin',
        'DDP runs without NCCL on CUDA devices: NCCL is the fastest backend for DDP on GPUs.'
    from trace_ranks
    join cuda_capable using (run_id, trace_id)
    left join nccl_ops using (run_id, trace_id)
    where coalesce(nccl_ops.nccl_ops, 0) = 0
        and exists (
            from wrapper_ops
            where wrapper_ops.trace_id = trace_ranks.trace_id
                and wrapper_ops.run_id = trace_ranks.run_id
                and wrapper_ops.name = 'DistributedDataParallel.forward'
        )
),

straggler_rule as (
    select
        trace_ranks.run_id, trace_ranks.trace_id, trace_ranks.rank, 'straggler', 'caused_wait_ratio',
        stragglers.caused_wait_ratio, 0.5, 'critical', 'tracelake',
        format('Rank {} arrived last at {} of {} collectives and made the other ranks wait {:.1f} ms in all; it held '
            || 'the others back at {} of {} steps{}: look for extra work, slower input or a slower device on that rank.',
            stragglers.rank, stragglers.arrived_last_count, stragglers.collectives, stragglers.caused_wait_ns / 1e6,
            stragglers.culprit_steps, stragglers.steps,
            coalesce(format(', {:.1f} ms late each, because of its {}', stragglers.mean_culprit_late_ns / 1e6,
                replace(stragglers.cause, '_', ' ')), ''))
    from trace_ranks
    join stragglers using (run_id, rank)
    where stragglers.is_straggler
),

-- A rank that did not run collectives its group's other ranks ran (straggler_steps.missed_collectives).
missed_collective_rule as (
    select
        run_id, trace_id, any_value(rank), 'missed_collective', 'missed_collectives', sum(missed_collectives), 0,
        'critical', 'tracelake',
        format('Rank {} did not run {} collective(s) that the other ranks of its process group ran (the first in step '
            || '{}): they waited for it until the collective timed out or the job hung. Check that every rank calls '
            || 'the same collectives in the same order (a branch on the rank or on its data, an early exit).',
            any_value(rank), sum(missed_collectives), min(step))
    from straggler_steps
    where missed_collectives > 0
    group by run_id, trace_id
),

warmup_rule as (
    select
        run_id, trace_id, any_value(rank), 'warmup_steps', 'warmup_steps', count(*), 0, 'info', 'tracelake',
        format('Step {} took {:.1f}x the median step: a warmup step inside the profiled window skews averages; start '
            || 'the active window later (schedule(wait=..., warmup=...)) or leave it out.',
            min(step), max(vs_median))
    from step_health
    where is_warmup
    group by run_id, trace_id
),

dead_window as (
    select
        run_id, trace_id, any_value(rank) as rank,
        sum(first_op_gap_ns) / nullif(sum(total_ns), 0) as dead_window_ratio
    from step_health
    group by run_id, trace_id
),

dead_window_rule as (
    select
        run_id, trace_id, rank, 'dead_window', 'dead_window_ratio', dead_window_ratio, 0.1, 'warning', 'tracelake',
        format('{:.1f}% of the step time passes before a step''s first op: look for host work outside ops at the '
            || 'start of a step (Python data handling, logging, synchronization).', dead_window_ratio * 100)
    from dead_window
    where dead_window_ratio > 0.1
),

launch_bound as (
    select
        run_id, trace_id, any_value(rank) as rank,
        count(*) filter (where mean_launch_delay_ns < 20000) / count(*) as launch_bound_ratio
    from step_health
    where mean_launch_delay_ns is not null
    group by run_id, trace_id
),

launch_bound_rule as (
    select
        run_id, trace_id, rank, 'launch_bound_steps', 'launch_bound_steps_ratio', launch_bound_ratio, 0.5, 'warning',
        'tracelake',
        format('In {:.0f}% of the steps device work starts under 20 us after its launch call: the device waits for '
            || 'the host; fuse small ops (torch.compile), use CUDA graphs or larger batches.', launch_bound_ratio * 100)
    from launch_bound
    where launch_bound_ratio >= 0.5
),

-- A process group whose communication, not hidden under computation, is a large share of the steps (comm_by_group):
-- the group exposing the most on each trace, with the phase where it exposes the most.
group_phase_exposure as (
    select
        int_steps.run_id, int_steps.trace_id, any_value(int_steps.rank) as rank, comm.process_group, comm.phase,
        any_value(comm.group_desc) as group_desc, any_value(comm.group_ranks) as group_ranks,
        sum(comm.exposed_ns) as exposed_ns
    from comm_by_group as comm
    join int_steps
        on int_steps.run_id = comm.run_id
        and int_steps.rank = comm.rank
        and int_steps.step = comm.step
    group by int_steps.run_id, int_steps.trace_id, comm.process_group, comm.phase
),

group_exposure as (
    select
        exposure.run_id, exposure.trace_id, any_value(exposure.rank) as rank, exposure.process_group,
        any_value(exposure.group_desc) as group_desc, any_value(exposure.group_ranks) as group_ranks,
        sum(exposure.exposed_ns) / any_value(steps_time.total_ns) as exposed_ratio,
        arg_max(exposure.phase, exposure.exposed_ns) as worst_phase
    from group_phase_exposure as exposure
    join (
        select trace_id, sum(end_ns - start_ns) as total_ns from int_steps group by trace_id
    ) as steps_time using (trace_id)
    group by exposure.run_id, exposure.trace_id, exposure.process_group
),

exposed_group_rule as (
    select
        run_id, trace_id, rank, 'exposed_group_communication', 'exposed_step_ratio', exposed_ratio, 0.1, 'warning',
        'tracelake',
        format('{:.1f}% of the step time is communication of {} not hidden under computation, most of it in {}: '
            || 'overlap it with computation by issuing it earlier and asynchronously (DDP/FSDP bucketing and '
            || 'prefetch, async tensor parallelism) or send less (larger buckets, lower precision).',
            exposed_ratio * 100,
            coalesce(format('process group {} ({}, ranks {})', process_group, group_desc, group_ranks::varchar),
                'a process group the trace does not name'),
            worst_phase)
    from group_exposure
    where exposed_ratio > 0.1
    qualify row_number() over (partition by run_id, trace_id order by exposed_ratio desc, process_group) = 1
),

-- A pipeline stage whose bubble exceeds its schedule's ideal by more than 10 points of the step (pipeline_stages).
stage_bubbles as (
    select
        int_steps.run_id, int_steps.trace_id, any_value(int_steps.rank) as rank, any_value(stages.stage) as stage,
        avg(stages.bubble_ratio) as bubble_ratio, avg(stages.ideal_bubble_ratio) as ideal_bubble_ratio,
        sum(stages.wait_ns) / sum(stages.step_ns) as wait_ratio,
        any_value(stages.stages) as stages, any_value(stages.microbatches) as microbatches
    from pipeline_stages as stages
    join int_steps
        on int_steps.run_id = stages.run_id
        and int_steps.rank = stages.rank
        and int_steps.step = stages.step
    where stages.ideal_bubble_ratio is not null
    group by int_steps.run_id, int_steps.trace_id
),

pipeline_bubble_rule as (
    select
        run_id, trace_id, rank, 'pipeline_bubble', 'bubble_ratio', bubble_ratio, ideal_bubble_ratio + 0.1,
        'warning', 'tracelake',
        format('Pipeline stage {} idles {:.1f}% of its step where the {}-stage schedule with {} micro-batches idles '
            || '{:.1f}%; {:.1f}% of the step waits for a neighbouring stage: balance the stages'' work, use more '
            || 'micro-batches or an interleaved schedule.',
            stage, bubble_ratio * 100, stages, microbatches, ideal_bubble_ratio * 100, wait_ratio * 100)
    from stage_bubbles
    where bubble_ratio > ideal_bubble_ratio + 0.1
),

fired as (
    select * from dataloader_rule
    union all select * from communication_rule
    union all select * from gpu_utilization_rule
    union all select * from tensor_core_rule
    union all select * from memory_rule
    union all select * from data_parallel_rule
    union all select * from backend_rule
    union all select * from straggler_rule
    union all select * from missed_collective_rule
    union all select * from warmup_rule
    union all select * from dead_window_rule
    union all select * from launch_bound_rule
    union all select * from exposed_group_rule
    union all select * from pipeline_bubble_rule
)

select
    run_id,
    trace_id,
    rule,
    cast(metric_value as double) as metric_value,
    cast(threshold as double) as threshold,
    severity,
    message,
    rank,
    metric,
    source
from fired
