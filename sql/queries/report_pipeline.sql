-- One row per pipeline stage and rank of the run $run_id (pipeline_stages): the bubble against the schedule's ideal,
-- means over the steps.
-- grain: run_id, stage, rank
-- source: tracelake pipeline_stages (issue 29)
-- column: steps: steps the means are over
-- column: bubble_ratio: mean share of the step the stage waits
-- column: ideal_bubble_ratio: the schedule's ideal bubble
-- column: compute_ns: mean computing time per step
-- column: send_recv_ns: mean send/recv time per step
-- column: wait_ns: mean time waiting for a neighbour per step
select
    run_id,
    stage,
    rank,
    count(*) as steps,
    avg(bubble_ratio) as bubble_ratio,
    avg(ideal_bubble_ratio) as ideal_bubble_ratio,
    avg(compute_ns) as compute_ns,
    avg(send_recv_ns) as send_recv_ns,
    avg(wait_ns) as wait_ns
from pipeline_stages
where run_id = $run_id and stage is not null
group by all
order by stage, rank
