-- One row per host range (cpu_ops, annotations) recorded with shapes: `input_dims` as torch's key_averages groups
-- it (minified JSON of `Input Dims`, a tensor-list argument written `[]`: the trace lists each tensor's dims,
-- torch's in-memory input_shapes do not), and the op's args the performance model reads (dims as nested lists,
-- `Input type`, `Concrete Inputs`, the profiler's own `flops` where the trace has it).
-- source: torch.autograd.profiler_util FunctionEvent.input_shapes; Kineto cpu_op args
with

recorded as (
    select trace_id, event_idx, input_dims, input_types, concrete_inputs, flops from cpu_ops
    union all by name
    select trace_id, event_idx, input_dims, input_types from annotations
)

select
    trace_id,
    event_idx,
    '[' || array_to_string(
        list_transform(
            json_extract(input_dims, '$[*]'),
            dims -> if(json_type(dims, '$[0]') = 'ARRAY', '[]', dims::varchar)
        ),
        ','
    ) || ']' as input_dims,
    -- one list of dims per argument; a non-tensor argument (or a tensor list) gives an empty or null list
    list_transform(json_extract(input_dims, '$[*]'), dims -> try_cast(dims as bigint[])) as arg_dims,
    list_transform(json_extract_string(input_types, '$[*]'), t -> lower(t)) as arg_types,
    json_extract_string(concrete_inputs, '$[*]') as concrete_inputs,
    flops as profiler_flops
from recorded
where input_dims is not null
