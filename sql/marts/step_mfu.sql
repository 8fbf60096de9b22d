-- One row per rank and step of a trace recorded with shapes (record_shapes=True): the model FLOPs the step did, its
-- time, the TFLOP/s achieved, and the model FLOPs utilization against the GPU's dense peak for the step's dtype.
-- model_flops: the FLOPs of the step's matrix products, the work MFU counts (op_perf's GEMM, attention and
-- convolution families; elementwise and normalization work is left out), each counted once, on the op that does it
-- (op_perf's owns_flops: addmm, not the linear around it): per call, the profiler's own `flops` arg where the trace
-- has one (with_flops=True), else op_perf's FLOPs for the call's op and shapes (its total over its calls). A call
-- belongs to the step whose host range (int_steps) holds its start. A forward call run again in backward, as
-- activation checkpointing recomputes, counts in hardware_flops only: a call inside int_phase_ranges' backward that
-- records autograd history, itself or an op around it (a Sequence number: aten::convolution records it, not the
-- _convolution doing the work; the backward's own ops record none, its autograd nodes record their forward's).
-- step_ns: the step on the device side, by int_steps' rule (tb_plugin's) over every runtime call where int_steps
-- applies it to the legacy `Runtime` category only: a step ends when the device work launched from its host range
-- ends, if later, and starts when the previous step ended, if later. The host can run ahead of the GPU, by part of
-- a step (a trace without ProfilerStep#N is one step: the host's range) or by several; its ranges alone then
-- overstate MFU, and ranges reaching to their own device work overlap. achieved_tflops_per_s = model_flops /
-- step_ns. dtype: the element type holding most of the step's matrix FLOPs (fp64, fp32, bf16, fp16, fp8).
-- peak_tflops_per_s: the dense peak of the trace's GPU
-- (deviceProperties.name, int_gpu_peaks) for that dtype (bf16 and fp16 share the tensor-core rate, fp32 the
-- non-tensor-core rate). mfu_ratio = achieved_tflops_per_s / peak_tflops_per_s: null without a known peak (CPU
-- traces, unknown GPUs). hardware_flops: model_flops plus recomputed FLOPs (HFU's numerator).
-- flops_known_ratio: the share of the step's work whose FLOPs op_perf knows, so that an MFU is read with it: the
-- device time (or, in a trace without device activity, the host time) of the step's outermost ops that have FLOPs
-- (any op_perf family, matrix or not), over that of its top-level ops. An MFU of a ResNet whose convolutions carry
-- no shapes, or of a model of custom kernels, counts little of its work: its flops_known_ratio says so (0 where no
-- op of the step has FLOPs). A page showing mfu_ratio shows it beside.
-- grain: run_id, rank, step, trace_id
-- source: MFU as PaLM (Chowdhery et al. 2022, appendix B) defines it; FLOPs from op_perf (TraceLens' model, torch with_flops)
-- column: model_flops: FLOPs of the step's matrix products, recomputation left out
-- column: step_ns: the step's duration on the device side
-- column: achieved_tflops_per_s: model_flops / step time, TFLOP/s
-- column: peak_tflops_per_s: the GPU's dense peak for dtype, TFLOP/s (vendor data sheet)
-- column: dtype: element type of most of the step's matrix FLOPs (fp64, fp32, bf16, fp16, fp8)
-- column: mfu_ratio: achieved / peak (null without a known peak)
-- column: hardware_flops: model_flops plus forward work recomputed in backward
-- column: gpu_model: the GPU whose peak applies
-- column: trace_id: the trace of the step (a rank's trace files may each number their steps from 0)
-- column: flops_known_ratio: share of the step's device time (host time without device activity) in ops whose FLOPs are known
with

matrix_shapes as (
    select trace_id, op_name, input_dims, flops / calls as flops_per_call
    from op_perf
    where owns_flops and family in ('GEMM', 'SDPA', 'CONV')
),

-- The ops that record autograd history (a Sequence number), as subtrees of their thread's tree, but the autograd
-- engine's own (evaluate_function and the nodes it runs, which carry their forward op's number).
history_records as (
    select nodes.thread_no, nodes.pos, nodes.last_pos
    from int_op_nodes as nodes
    join cpu_ops using (trace_id, event_idx)
    where nodes.tree = 'torch'
        and cpu_ops.sequence_number is not null
        and not contains(nodes.name, 'autograd::')
        and not regexp_matches(nodes.name, 'Backward\d*$')
),

calls as (
    select
        nodes.run_id,
        nodes.trace_id,
        nodes.rank,
        nodes.tid,
        nodes.ts_ns,
        coalesce(shapes.profiler_flops, matrix_shapes.flops_per_call) as flops,
        case
            when shapes.arg_types[1] = 'double' then 'fp64'
            when shapes.arg_types[1] = 'float' then 'fp32'
            when shapes.arg_types[1] = 'c10::bfloat16' then 'bf16'
            when shapes.arg_types[1] = 'c10::half' then 'fp16'
            when starts_with(shapes.arg_types[1], 'c10::float8') then 'fp8'
        end as dtype,
        exists (
            select 1 from history_records
            where history_records.thread_no = nodes.thread_no
                and history_records.pos <= nodes.pos
                and nodes.pos <= history_records.last_pos
        ) as records_history
    from int_op_nodes as nodes
    join int_op_shapes as shapes using (trace_id, event_idx)
    join matrix_shapes
        on matrix_shapes.trace_id = nodes.trace_id
        and matrix_shapes.op_name = nodes.name
        and matrix_shapes.input_dims = shapes.input_dims
    where nodes.tree = 'torch' and not nodes.merged_into_parent
),

-- The ops whose FLOPs op_perf knows, outermost first: their subtrees' time is the work MFU can account for.
known_ops as (
    select nodes.trace_id, nodes.thread_no, nodes.pos, nodes.last_pos, nodes.ts_ns, nodes.dur_ns, nodes.device_total_ns
    from int_op_nodes as nodes
    join int_op_shapes as shapes using (trace_id, event_idx)
    join (select distinct trace_id, op_name, input_dims from op_perf where flops is not null) as known
        on known.trace_id = nodes.trace_id
        and known.op_name = nodes.name
        and known.input_dims = shapes.input_dims
    where nodes.tree = 'torch' and not nodes.merged_into_parent
),

-- The step's accountable time: the outermost known ops' and the top-level ops', each starting in a host step.
work as (
    select trace_id, ts_ns, dur_ns, device_total_ns, true as is_known
    from known_ops
    where not exists (
        select 1 from known_ops as outer_op
        where outer_op.trace_id = known_ops.trace_id
            and outer_op.thread_no = known_ops.thread_no
            and outer_op.pos < known_ops.pos
            and known_ops.pos <= outer_op.last_pos
    )
    union all
    select trace_id, ts_ns, dur_ns, device_total_ns, false
    from int_op_nodes
    where tree = 'torch' and depth = 0
),

known_shares as (
    select
        int_steps.trace_id,
        int_steps.step,
        case
            when sum(work.device_total_ns) filter (where not work.is_known) > 0
                then coalesce(sum(work.device_total_ns) filter (where work.is_known), 0)
                    / sum(work.device_total_ns) filter (where not work.is_known)
            else coalesce(sum(work.dur_ns) filter (where work.is_known), 0)
                / nullif(sum(work.dur_ns) filter (where not work.is_known), 0)
        end as flops_known_ratio
    from work
    asof join int_steps
        on int_steps.trace_id = work.trace_id
        and int_steps.host_start_ns <= work.ts_ns
    where work.ts_ns < int_steps.host_end_ns
    group by all
),

-- Forward work run again in backward (activation checkpointing): a call that records autograd history there.
flagged as (
    select
        calls.*,
        calls.records_history and coalesce(backward.end_ns > calls.ts_ns, false) as recomputed
    from calls
    asof left join (select * from int_phase_ranges where phase = 'backward') as backward
        on backward.trace_id = calls.trace_id
        and backward.tid = calls.tid
        and backward.ts_ns <= calls.ts_ns
),

stepped as (
    select flagged.*, int_steps.step
    from flagged
    asof join int_steps
        on int_steps.trace_id = flagged.trace_id
        and int_steps.host_start_ns <= flagged.ts_ns
    where flagged.ts_ns < int_steps.host_end_ns
),

per_step as (
    select
        trace_id,
        step,
        sum(flops) filter (where not recomputed) as model_flops,
        sum(flops) as hardware_flops,
        arg_max(dtype, flops) filter (where dtype is not null) as dtype
    from stepped
    group by all
),

-- The last end of the device work launched from within each step's host range.
launched_ends as (
    select int_steps.trace_id, int_steps.step, max(launches.gpu_end_ns) as device_end_ns
    from int_launches as launches
    asof join int_steps
        on int_steps.trace_id = launches.trace_id
        and int_steps.host_start_ns <= launches.cpu_ts_ns
    where launches.cpu_ts_ns < int_steps.host_end_ns
    group by all
),

-- Each step's reach (its end, or its device work's); a step ends at the furthest reach so far and starts at the
-- furthest reach before it: the running maxima unroll int_steps' end_i = max(end_i-1, reach_i).
reaches as (
    select int_steps.*, greatest(int_steps.end_ns, launched_ends.device_end_ns) as reach_ns
    from int_steps
    left join launched_ends using (trace_id, step)
),

-- Every step of a trace with matrix products has a row, one without any counting 0 FLOPs.
step_windows as (
    select
        run_id, trace_id, rank, step,
        max(reach_ns) over (partition by trace_id order by step_idx rows unbounded preceding)
            - greatest(start_ns, coalesce(max(reach_ns) over (
                partition by trace_id order by step_idx rows between unbounded preceding and 1 preceding
            ), start_ns)) as step_ns
    from reaches
    semi join calls using (trace_id)
),

rated as (
    select
        step_windows.*,
        coalesce(per_step.model_flops, 0)::bigint as model_flops,
        coalesce(per_step.hardware_flops, 0)::bigint as hardware_flops,
        per_step.dtype,
        coalesce(per_step.model_flops, 0) / nullif(step_windows.step_ns, 0) / 1000 as achieved_tflops_per_s,
        trace_peaks.model as gpu_model,
        case per_step.dtype
            when 'fp64' then trace_peaks.fp64_tflops
            when 'fp32' then trace_peaks.fp32_tflops
            when 'bf16' then trace_peaks.fp16_tflops
            when 'fp16' then trace_peaks.fp16_tflops
            when 'fp8' then trace_peaks.fp8_tflops
        end as peak_tflops_per_s,
        coalesce(known_shares.flops_known_ratio, 0) as flops_known_ratio
    from step_windows
    left join per_step using (trace_id, step)
    left join known_shares using (trace_id, step)
    left join int_trace_peaks as trace_peaks using (trace_id)
)

select
    run_id,
    rank,
    step,
    model_flops,
    step_ns,
    achieved_tflops_per_s,
    peak_tflops_per_s,
    dtype,
    achieved_tflops_per_s / peak_tflops_per_s as mfu_ratio,
    hardware_flops,
    gpu_model,
    trace_id,
    flops_known_ratio
from rated
