-- One row per rank of the run $run_id: the computation/communication overlap of its steps (comm_overlap_by_step,
-- torch-tb-profiler's distributed view), the mean of each part over every step the rank ran.
-- grain: run_id, rank
-- source: torch-tb-profiler 0.4.3 distributed view (overall_parser.py, communication overlap); ANCHORS.md §3.3
-- column: steps: the steps the means are over
-- column: computation_ns: mean time computing only, per step
-- column: overlapping_ns: mean time computing and communicating at once, per step
-- column: communication_ns: mean communication not hidden under computation, per step
-- column: other_ns: mean time doing neither, per step
select
    run_id,
    rank,
    count(*) as steps,
    avg(computation_ns) as computation_ns,
    avg(overlapping_ns) as overlapping_ns,
    avg(communication_ns) as communication_ns,
    avg(other_ns) as other_ns
from comm_overlap_by_step
where run_id = $run_id
group by run_id, rank
order by rank
