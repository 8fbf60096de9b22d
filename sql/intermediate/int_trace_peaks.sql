-- One row per trace recorded on a GPU that int_gpu_peaks knows: the trace's GPU (the smallest deviceProperties.name
-- over its GPU devices, deterministic where a host mixes models) and that model's peaks.
-- source: vendor data sheets (int_gpu_peaks)
with

trace_gpus as (
    select trace_id, min(device_name) as device_name
    from devices
    where device >= 0
    group by all
)

select trace_gpus.trace_id, trace_gpus.device_name, peaks.*
from trace_gpus
join int_gpu_peaks as peaks on regexp_matches(trace_gpus.device_name, peaks.name_pattern, 'i')
qualify row_number() over (partition by trace_gpus.trace_id order by peaks.priority) = 1
