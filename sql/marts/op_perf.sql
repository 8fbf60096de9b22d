-- One row per modelled op name and input shapes of a trace: FLOPs and bytes from the op's shapes and dtypes,
-- summed over its calls, against its device time (kernels/memcpy/memset launched by the op and its descendants,
-- int_op_nodes) and the GPU's peaks (int_gpu_peaks, by deviceProperties.name and the op's dtype):
-- tflops_per_s = flops / device time, tb_per_s = bytes / device time, arithmetic_intensity = flops / bytes,
-- bound = 'compute' when the intensity reaches the GPU's ridge point (peak FLOP/s ÷ peak bytes/s) else 'memory',
-- peak_flops_ratio = achieved ÷ peak FLOP/s. Families and formulas follow TraceLens' performance model:
--   GEMM (aten::mm, addmm, bmm, baddbmm, matmul, linear; AMD inference's aiter::gemm_a16w16, gemm_a16w16_atomic_
--     and vllm::rocm_unquantized_gemm, which take linear's x [M, K], weight [N, K], bias): 2·B·M·N·K;
--     bytes = inputs + output.
--   SDPA (aten::scaled_dot_product_attention and its flash/efficient/cudnn kernels' ops):
--     2·B·H·Nq·Nkv·(d_qk + d_v), halved when causal; bytes = q + k + v + output. Their backward ops (flash, the
--     CPU flash, efficient, cudnn; TraceLens has no FLOP model for them): FlopCounterMode's
--     2·B·H·Nq·Nkv·(3·d_qk + 2·d_v) (q·kᵀ recomputed, grad scores, grad v, grad q, grad k), halved when causal as
--     the forward (torch halves neither); bytes = q, k, v, output and grad_output read, grad q, k and v written.
--   CONV (aten::conv1d/2d/3d, convolution, _convolution): 2·|output|·|weight[1:]| (transposed: 2·|input|·…);
--     bytes = input + weight + bias + output. aten::convolution_backward: the forward's FLOPs for each of grad input
--     and grad weight its output_mask asks for; bytes = grad_output + input + weight for each, and grad_output +
--     C_out for a bias gradient.
--   elementwise: TraceLens' unary list (copy, clamp_min/max, sigmoid, rsqrt, silu, neg, pow, in-place too):
--     |input| FLOPs, input and output bytes; binary list (add, mul, div, in-place, sigmoid/threshold_backward):
--     |broadcast output| FLOPs, both inputs and the output (typed as a third tensor argument, out=, where there is
--     one, else as the wider of two tensors, else as the first argument).
--   NORM (layer_norm, batch_norm, group_norm and their native_ ops, instance_norm): 6·C + 5·E training (batch_norm
--     in eval and instance_norm on running stats: 6·C + 2·E; group_norm always trains, on C = input dim 1 as
--     TraceLens); bytes = E in and out + C per weight, bias, mean, variance (and 2 running stats when training).
--     Their native_*_backward ops as TraceLens' BatchNormBwd/LayerNormBwd/GroupNormBwd (C: group norm's channels ÷
--     groups), output_mask asking for grad input, weight, bias: 4·E, + 3·C in eval, + 5·E (eval 2·E) for grad
--     input; bytes = E grad_output + E input + E grad input (training) + C invstd (training) + C weight read for a
--     weight gradient, + C per grad weight and grad bias written (training).
-- Bytes per element from the `Input type` names as TraceLens' name2bpe (double/long int 8; float/int/scalar 4;
-- half/bfloat16 2; float8, packed float4 pairs, char 1; other names, bool among them, unsized: a shape with such a
-- call has null bytes). profiler_flops keeps the profiler's own `flops` arg where the trace has one.
-- Deliberate differences from TraceLens: GEMM and convolution FLOPs leave out the bias add, as torch's own count
-- (with_flops) does, so that ours equal torch's for every op torch counts (but add/mul whose first input is the
-- smaller of a broadcast: torch counts that input's elements, not the output's); the added tensor of addmm/baddbmm is
-- counted at its real size (TraceLens assumes 1×N); batch_norm's training and instance_norm's use_input_stats flags
-- are read as the booleans they are, as are native_batch_norm_backward's train flag (TraceLens: always training) and
-- each norm backward's output_mask (TraceLens: batch norm's grad input, batch and group norm's weight and bias always;
-- an else on the wrong if adds eval's 2·E grad input where the mask skips grad input); convolution_backward counts
-- the gradients its output_mask asks for, as torch's FlopCounterMode does (TraceLens counts grad input also where
-- the mask skips it, as for a first layer), and a bias gradient's bytes but not its FLOPs (TraceLens looks for the
-- bias as a tensor; bias_sizes is a list of ints); an op folded into a same-name caller (add.Scalar forwarding to
-- add.Tensor) is one call, as torch counts it, where TraceLens counts two (and their FLOPs twice). Where TraceLens'
-- bytes are off, ours count what the op moves: a convolution's bias (TraceLens looks for it as the third of three
-- Input Dims; aten::convolution has nine) and no absent weight or bias of a norm (TraceLens takes an empty shape for
-- a tensor).
-- Ops outside these families, or with shapes or concrete inputs the formulas cannot read, have no row.
-- An op and the op it calls both have rows (aten::linear and its addmm, matmul and its mm/bmm, attention and its
-- flash op, conv2d down to _convolution, vllm::rocm_unquantized_gemm and the aiter or aten GEMM it calls), each with
-- the same FLOPs: a run's FLOPs are sum(flops) filter (where owns_flops), the rows no op below counted again.
-- grain: run_id, trace_id, op_name, input_dims
-- source: TraceLens (AMD-AGI/TraceLens) TraceLens/PerfModel/perf_model.py, torch_op_mapping.py and
-- extensions/perf_model_extensions.py; torch with_flops (torch/csrc/profiler/util.cpp computeFlops) and
-- FlopCounterMode (torch/utils/flop_counter.py)
-- column: owns_flops: no op inside these calls counted FLOPs of the same kind of work again: sum flops over these rows
with

ops as (
    select
        nodes.run_id,
        nodes.trace_id,
        nodes.rank,
        nodes.name as op_name,
        nodes.thread_no,
        nodes.pos,
        nodes.last_pos,
        nodes.device_total_ns,
        shapes.input_dims,
        shapes.arg_dims as d,
        shapes.arg_types as t,
        shapes.concrete_inputs as c,
        shapes.profiler_flops,
        case
            when nodes.name in ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm', 'aten::matmul',
                                'aten::linear', 'aiter::gemm_a16w16', 'aiter::gemm_a16w16_atomic_',
                                'vllm::rocm_unquantized_gemm') then 'GEMM'
            when nodes.name in ('aten::scaled_dot_product_attention', 'aten::_scaled_dot_product_flash_attention',
                                'aten::_scaled_dot_product_flash_attention_for_cpu',
                                'aten::_scaled_dot_product_efficient_attention',
                                'aten::_scaled_dot_product_cudnn_attention',
                                'aten::_scaled_dot_product_flash_attention_backward',
                                'aten::_scaled_dot_product_flash_attention_for_cpu_backward',
                                'aten::_scaled_dot_product_efficient_attention_backward',
                                'aten::_scaled_dot_product_cudnn_attention_backward') then 'SDPA'
            when nodes.name in ('aten::conv1d', 'aten::conv2d', 'aten::conv3d', 'aten::convolution',
                                'aten::_convolution', 'aten::convolution_backward') then 'CONV'
            when nodes.name in ('aten::copy', 'aten::copy_', 'aten::clamp_min', 'aten::clamp_min_',
                                'aten::clamp_max', 'aten::clamp_max_', 'aten::sigmoid', 'aten::rsqrt', 'aten::silu',
                                'aten::neg', 'aten::pow') then 'unary_elementwise'
            when nodes.name in ('aten::div', 'aten::div_', 'aten::mul', 'aten::mul_', 'aten::add', 'aten::add_',
                                'aten::sigmoid_backward', 'aten::threshold_backward') then 'binary_elementwise'
            when nodes.name in ('aten::layer_norm', 'aten::native_layer_norm',
                                'aten::native_layer_norm_backward') then 'layer_norm'
            when nodes.name in ('aten::batch_norm', 'aten::native_batch_norm',
                                'aten::native_batch_norm_backward') then 'batch_norm'
            when nodes.name in ('aten::group_norm', 'aten::native_group_norm',
                                'aten::native_group_norm_backward') then 'group_norm'
            when nodes.name = 'aten::instance_norm' then 'instance_norm'
        end as family
    from int_op_nodes as nodes
    join int_op_shapes as shapes using (trace_id, event_idx)
    where nodes.tree = 'torch' and not nodes.merged_into_parent
),

-- Sizes every family reads: element counts of the first four arguments (an empty shape is a scalar: 1) and each
-- argument's bytes per element (null for a type name outside TraceLens' name2bpe, as there: bool, old traces' long).
sized as (
    select
        *,
        coalesce(list_aggregate(d[1], 'product'), 1) as n1,
        coalesce(list_aggregate(d[2], 'product'), 1) as n2,
        coalesce(list_aggregate(d[3], 'product'), 1) as n3,
        coalesce(len(d[3]), 0) > 0 as has_arg3,
        coalesce(len(d[4]), 0) > 0 as has_arg4,
        list_transform(t, type_name -> case
            when type_name in ('double', 'long int') then 8
            when type_name in ('float', 'int', 'scalar') then 4
            when type_name in ('c10::half', 'c10::bfloat16') then 2
            when type_name in ('c10::float8_e4m3fnuz', 'c10::float8_e4m3fn', 'c10::float8_e5m2',
                               'c10::float8_e8m0fnu', 'c10::float4_e2m1fn_x2', 'unsigned char', 'signed char') then 1
        end) as bpes,
        bpes[1] as bpe
    from ops
    -- convolution strides/padding, attention causality and norm flags are concrete inputs: without them (traces
    -- before torch 2.x record none) those families cannot be sized (group_norm reads none; its backward, output_mask,
    -- has no row without it)
    where family in ('GEMM', 'unary_elementwise', 'binary_elementwise', 'group_norm')
        or (family is not null and c is not null)
),

gemm as (
    select
        * exclude (dims),
        2 * dims.batch * dims.m * dims.n * dims.k as flops,
        (dims.a + dims.b + dims.batch * dims.m * dims.n + dims.bias) * bpe as bytes
    from (
        select
            *,
            -- the vendor ops take linear's arguments: x [M, K], weight [N, K], bias [N] (aiter's _atomic_ has none)
            case if(op_name in ('aiter::gemm_a16w16', 'aiter::gemm_a16w16_atomic_', 'vllm::rocm_unquantized_gemm'),
                    'aten::linear', op_name)
                when 'aten::mm' then {'batch': 1, 'm': d[1][1], 'k': d[1][2], 'n': d[2][2], 'a': n1, 'b': n2, 'bias': 0}
                when 'aten::addmm' then {'batch': 1, 'm': d[2][1], 'k': d[2][2], 'n': d[3][2], 'a': n2, 'b': n3, 'bias': n1}
                when 'aten::bmm'
                    then {'batch': d[1][1], 'm': d[1][2], 'k': d[1][3], 'n': d[2][3], 'a': n1, 'b': n2, 'bias': 0}
                when 'aten::baddbmm'
                    then {'batch': d[2][1], 'm': d[2][2], 'k': d[2][3], 'n': d[3][3], 'a': n2, 'b': n3, 'bias': n1}
                when 'aten::matmul' then {
                    'batch': greatest(
                        coalesce(list_aggregate(list_slice(d[1], 1, len(d[1]) - 2), 'product'), 1),
                        coalesce(list_aggregate(list_slice(d[2], 1, len(d[2]) - 2), 'product'), 1)
                    ),
                    'm': if(len(d[1]) >= 2, d[1][-2], 1), 'k': d[1][-1], 'n': if(len(d[2]) >= 2, d[2][-1], 1),
                    'a': n1, 'b': n2, 'bias': 0}
                when 'aten::linear' then {
                    'batch': 1, 'm': coalesce(list_aggregate(list_slice(d[1], 1, len(d[1]) - 1), 'product'), 1), 'k': d[1][-1], 'n': d[2][1],
                    'a': n1, 'b': n2, 'bias': if(has_arg3, n3, 0)}
            end as dims
        from sized
        where family = 'GEMM'
    )
),

sdpa as (
    select
        * exclude (q, k, v, causal),
        2 * q[1] * q[2] * q[3] * k[3] * (q[4] + v[4]) // if(causal, 2, 1) as flops,
        (n1 + n2 + n3 + q[1] * q[2] * q[3] * v[4]) * bpe as bytes
    from (
        select
            *,
            d[1] as q, d[2] as k, d[3] as v,
            c[case op_name
                when 'aten::scaled_dot_product_attention' then 6
                when 'aten::_scaled_dot_product_flash_attention' then 5
                when 'aten::_scaled_dot_product_flash_attention_for_cpu' then 5
                else 7
            end] = 'True' as causal
        from sized
        where family = 'SDPA' and not ends_with(op_name, '_backward')
    )
),

-- The attention backward ops take (grad_out, query, key, value, ..., out, ...), [B, H, N, d] each: torch's
-- FlopCounterMode count (recompute q·kᵀ; grad scores and grad v from grad_out; grad q and grad k), halved when
-- causal as the forward; bytes read q, k, v, out and grad_out and write grad q, k and v.
sdpa_backward as (
    select
        * exclude (q, k, v, causal),
        2 * q[1] * q[2] * q[3] * k[3] * (3 * q[4] + 2 * v[4]) // if(causal, 2, 1) as flops,
        (2 * (n2 + n3 + coalesce(list_aggregate(v, 'product'), 1)) + 2 * n1) * bpe as bytes
    from (
        select
            *,
            d[2] as q, d[3] as k, d[4] as v,
            c[case op_name
                when 'aten::_scaled_dot_product_flash_attention_for_cpu_backward' then 8
                when 'aten::_scaled_dot_product_cudnn_attention_backward' then 15
                else 12
            end] = 'True' as causal
        from sized
        where family = 'SDPA' and ends_with(op_name, '_backward')
    )
),

-- Convolution arguments: stride, padding, dilation (a one-element list applies to every spatial dim; an empty
-- concrete input is the default), transposed, output_padding and groups by the op's signature.
conv_args as (
    select
        *,
        op_name in ('aten::convolution', 'aten::_convolution') and c[7] = 'True' as transposed,
        if(op_name in ('aten::convolution', 'aten::_convolution'), c[9], c[7]) as groups_text,
        len(d[1]) - 2 as spatial,
        list_transform([4, 5, 6, 8], i -> try_cast(nullif(c[i], '') as bigint[])) as lists
    from sized
    where family = 'CONV' and op_name != 'aten::convolution_backward'
),

conv as (
    select
        * exclude (out_spatial, out_channels),
        2 * if(transposed, n1, out_channels * d[1][1] * list_aggregate(out_spatial, 'product'))
            * list_aggregate(list_slice(d[2], 2, len(d[2])), 'product') as flops,
        (n1 + n2 + if(has_arg3, n3, 0) + d[1][1] * out_channels * list_aggregate(out_spatial, 'product')) * bpe
            as bytes
    from (
        select
            *,
            if(transposed, d[2][2] * coalesce(try_cast(groups_text as bigint), 1), d[2][1]) as out_channels,
            list_transform(range(1, spatial + 1), i ->
                if(
                    transposed,
                    (d[1][2 + i] - 1) * coalesce(lists[1][if(len(lists[1]) = 1, 1, i)], 1)
                        - 2 * coalesce(lists[2][if(len(lists[2]) = 1, 1, i)], 0)
                        + coalesce(lists[3][if(len(lists[3]) = 1, 1, i)], 1) * (d[2][2 + i] - 1)
                        + coalesce(lists[4][if(len(lists[4]) = 1, 1, i)], 0) + 1,
                    (d[1][2 + i] + 2 * coalesce(lists[2][if(len(lists[2]) = 1, 1, i)], 0)
                        - coalesce(lists[3][if(len(lists[3]) = 1, 1, i)], 1) * (d[2][2 + i] - 1) - 1)
                        // coalesce(lists[1][if(len(lists[1]) = 1, 1, i)], 1) + 1
                )
            ) as out_spatial
        from conv_args
    )
),

-- convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
-- output_padding, groups, output_mask): grad_output has the forward's output shape, so each of grad input
-- (grad_output with the weight) and grad weight (grad_output with the input) that output_mask asks for is the
-- forward's work again and reads grad_output, input and weight; a bias gradient reads grad_output, writes C_out.
conv_backward as (
    select
        * exclude (mask, forward_flops),
        (mask[1]::int + mask[2]::int) * forward_flops as flops,
        ((mask[1]::int + mask[2]::int) * (n1 + n2 + n3) + if(mask[3], n1 + d[1][2], 0)) * bpe as bytes
    from (
        select
            *,
            try_cast(c[11] as boolean[]) as mask,
            2 * if(c[8] = 'True', n2, n1) * list_aggregate(list_slice(d[3], 2, len(d[3])), 'product') as forward_flops
        from sized
        where op_name = 'aten::convolution_backward'
    )
),

elementwise as (
    select
        * exclude (out_dims),
        if(family = 'unary_elementwise', n1, coalesce(list_aggregate(out_dims, 'product'), 1)) as flops,
        if(
            family = 'unary_elementwise',
            n1 * (bpe + if(coalesce(len(d[2]), 0) > 0, bpes[2], bpe)),
            n1 * bpe + n2 * bpes[2] + coalesce(list_aggregate(out_dims, 'product'), 1) * case
                -- an out= tensor's type; else the wider of two tensors' types; else the first argument's
                when has_arg3 then bpes[3]
                when coalesce(len(d[1]), 0) > 0 and coalesce(len(d[2]), 0) > 0 then greatest(bpe, bpes[2])
                else bpe
            end
        ) as bytes
    from (
        select
            *,
            -- torch broadcasting aligns shapes on the right, a missing leading dim counting 1: the i-th dims
            -- from the end pair up (the output's dims come out last first, which its product ignores)
            list_transform(
                range(1, greatest(len(coalesce(d[1], [])), len(coalesce(d[2], []))) + 1),
                i -> greatest(
                    coalesce(list_reverse(coalesce(d[1], []))[i], 1), coalesce(list_reverse(coalesce(d[2], []))[i], 1)
                )
            ) as out_dims
        from sized
        where family in ('unary_elementwise', 'binary_elementwise')
    )
),

norm as (
    select
        * exclude (channels, training, weights),
        6 * channels + (if(training, 3, 0) + 2) * n1 as flops,
        (2 * n1 + (2 + weights + if(training, 2, 0)) * channels) * bpe as bytes
    from (
        select
            *,
            if(
                family = 'layer_norm',
                list_aggregate(try_cast(c[2] as bigint[]), 'product'),
                d[1][2]
            ) as channels,
            -- batch_norm's training, instance_norm's use_input_stats
            family in ('layer_norm', 'group_norm') or c[6] = 'True' as training,
            if(
                family = 'layer_norm' or op_name = 'aten::group_norm',
                has_arg3::int + has_arg4::int,
                (coalesce(len(d[2]), 0) > 0)::int + has_arg3::int
            ) as weights
        from sized
        where family in ('layer_norm', 'batch_norm', 'group_norm', 'instance_norm')
            and not ends_with(op_name, '_backward')
    )
),

-- native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps,
-- output_mask), native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
-- output_mask), native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask):
-- TraceLens' Normalization backward on E = |input| and C (batch: input dim 1; layer: normalized_shape's product;
-- group: input dim 1 ÷ groups), output_mask asking for grad input (m1), weight (m2) and bias (m3).
norm_backward as (
    select
        * exclude (channels, training, mask),
        if(training, 0, 3 * channels) + 4 * n2 + if(mask[1], if(training, 5, 2) * n2, 0) as flops,
        (n1 + if(mask[1] and training, 2, 1) * n2 + if(training, channels, 0)
            + if(mask[2], channels * if(training, if(mask[3], 3, 2), 1), 0)) * bpes[2] as bytes
    from (
        select
            *,
            case op_name
                when 'aten::native_batch_norm_backward' then d[2][2]
                when 'aten::native_layer_norm_backward' then list_aggregate(try_cast(c[3] as bigint[]), 'product')
                else d[2][2] // try_cast(c[9] as bigint)
            end as channels,
            op_name != 'aten::native_batch_norm_backward' or c[8] = 'True' as training,
            try_cast(c[if(op_name = 'aten::native_layer_norm_backward', 8, 10)] as boolean[]) as mask
        from sized
        where ends_with(op_name, '_norm_backward')
    )
    where mask is not null
),

modelled as (
    select run_id, trace_id, rank, op_name, input_dims, family, bpe, device_total_ns, profiler_flops, flops, bytes,
        thread_no, pos, last_pos
    from gemm
    union all by name
    select run_id, trace_id, rank, op_name, input_dims, family, bpe, device_total_ns, profiler_flops, flops, bytes,
        thread_no, pos, last_pos
    from sdpa
    union all by name
    select run_id, trace_id, rank, op_name, input_dims, family, bpe, device_total_ns, profiler_flops, flops, bytes,
        thread_no, pos, last_pos
    from sdpa_backward
    union all by name
    select run_id, trace_id, rank, op_name, input_dims, family, bpe, device_total_ns, profiler_flops, flops, bytes,
        thread_no, pos, last_pos
    from conv
    union all by name
    select run_id, trace_id, rank, op_name, input_dims, family, bpe, device_total_ns, profiler_flops, flops, bytes,
        thread_no, pos, last_pos
    from conv_backward
    union all by name
    select run_id, trace_id, rank, op_name, input_dims, family, bpe, device_total_ns, profiler_flops, flops, bytes,
        thread_no, pos, last_pos
    from elementwise
    union all by name
    select run_id, trace_id, rank, op_name, input_dims, family, bpe, device_total_ns, profiler_flops, flops, bytes,
        thread_no, pos, last_pos
    from norm
    union all by name
    select run_id, trace_id, rank, op_name, input_dims, family, bpe, device_total_ns, profiler_flops, flops, bytes,
        thread_no, pos, last_pos
    from norm_backward
),

-- A call owns its FLOPs when no op below it in its thread's tree counted FLOPs of the same kind of work: a
-- subtree is positions pos .. last_pos, so the next such call in pos order is a descendant exactly when it starts
-- within last_pos. Kinds: matrix products (GEMM, attention, convolution: linear over addmm, matmul over mm/bmm,
-- attention over its flash kernel op or its math path's bmm, conv2d over convolution over _convolution, vendor
-- GEMMs over the aiter or aten GEMM they call), normalization (layer_norm over native_layer_norm, group_norm over
-- native_group_norm, instance_norm over its batch_norm), elementwise. Work of another kind inside an op is its own
-- (the bias copy_ inside a CPU addmm, the bias add_ inside _convolution: the GEMM and CONV formulas leave it out).
owned as (
    select
        *,
        coalesce(
            lead(pos) over (
                partition by thread_no, case
                    when family in ('GEMM', 'SDPA', 'CONV') then 'matrix'
                    when family in ('layer_norm', 'batch_norm', 'group_norm', 'instance_norm') then 'normalization'
                    else 'elementwise'
                end
                order by pos
            ) > last_pos,
            true
        ) as owns_flops
    from modelled
    where flops is not null
),

per_shape as (
    select
        run_id,
        trace_id,
        op_name,
        input_dims,
        count(*) as calls,
        sum(device_total_ns)::bigint as total_device_ns,
        sum(flops)::bigint as flops,
        -- null where a call's bytes are (a type name outside name2bpe): not the bytes of some calls only
        if(count(bytes) = count(*), sum(bytes), null)::bigint as bytes,
        any_value(family) as family,
        -- calls of one shape in several dtypes: the dtype holding most device time sets the peak (deterministic)
        arg_max(bpe, {'device_ns': device_total_ns, 'bpe': bpe}) as bytes_per_element,
        sum(profiler_flops)::bigint as profiler_flops,
        -- calls of one op and shapes dispatch alike: every call owns its FLOPs or none does
        bool_and(owns_flops) as owns_flops,
        any_value(rank) as rank
    from owned
    group by all
),

rated as (
    select
        per_shape.*,
        trace_peaks.model as gpu_model,
        case per_shape.bytes_per_element
            when 8 then trace_peaks.fp64_tflops
            when 4 then trace_peaks.fp32_tflops
            when 2 then trace_peaks.fp16_tflops
            when 1 then trace_peaks.fp8_tflops
        end as peak_tflops_per_s,
        trace_peaks.hbm_tb_per_s as peak_tb_per_s,
        if(per_shape.total_device_ns > 0, per_shape.flops / per_shape.total_device_ns / 1000, null) as tflops_per_s,
        if(per_shape.total_device_ns > 0, per_shape.bytes / per_shape.total_device_ns / 1000, null) as tb_per_s,
        if(per_shape.bytes > 0, per_shape.flops / per_shape.bytes, null) as arithmetic_intensity
    from per_shape
    left join int_trace_peaks as trace_peaks using (trace_id)
)

select
    run_id,
    trace_id,
    op_name,
    input_dims,
    calls,
    total_device_ns,
    flops,
    bytes,
    tflops_per_s,
    tb_per_s,
    arithmetic_intensity,
    case
        when peak_tflops_per_s is null or peak_tb_per_s is null or arithmetic_intensity is null then null
        when arithmetic_intensity >= peak_tflops_per_s / peak_tb_per_s then 'compute'
        else 'memory'
    end as bound,
    tflops_per_s / peak_tflops_per_s as peak_flops_ratio,
    family,
    bytes_per_element,
    profiler_flops,
    owns_flops,
    gpu_model,
    peak_tflops_per_s,
    peak_tb_per_s,
    rank
from rated
