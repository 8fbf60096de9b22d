-- One row per rank of the run $run_id with model FLOPs (step_mfu): FLOP/s and MFU over its steps.
-- grain: run_id, rank
-- source: tracelake step_mfu (PaLM's model FLOPs utilization); ANCHORS.md §2.2
-- column: steps: steps with model FLOPs
-- column: model_flops: FLOPs over those steps
-- column: tflops_per_s: mean achieved TFLOP/s per step
-- column: peak_tflops_per_s: the device's dense peak for the steps' dtype (null: no known peak)
-- column: min_mfu_ratio: lowest step MFU (likewise median_mfu_ratio, max_mfu_ratio)
select
    run_id,
    rank,
    count(*) as steps,
    sum(model_flops) as model_flops,
    avg(achieved_tflops_per_s) as tflops_per_s,
    any_value(peak_tflops_per_s) as peak_tflops_per_s,
    any_value(dtype) as dtype,
    any_value(gpu_model) as gpu_model,
    min(mfu_ratio) as min_mfu_ratio,
    median(mfu_ratio) as median_mfu_ratio,
    max(mfu_ratio) as max_mfu_ratio
from step_mfu
where run_id = $run_id and model_flops > 0
group by run_id, rank
order by rank
