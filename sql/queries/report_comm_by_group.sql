-- One row per process group and phase of the run $run_id (comm_by_group summed over its ranks): where the run's
-- communication is, and how much of it no computation hides, most exposed first.
-- grain: run_id, process_group, phase
-- source: tracelake comm_by_group (issue 29); ANCHORS.md §3.3
-- column: process_group: the group's name, '(not in the trace)' where the trace names none
-- column: ranks: ranks with communication in the group and phase
-- column: collectives: collective and point-to-point instances, summed over ranks
-- column: communication_ns: communication time, summed over ranks
-- column: exposed_ns: communication not hidden under computation, summed over ranks
-- column: worst_exposed_step_ratio: the largest share of one step exposed
select
    run_id,
    coalesce(process_group, '(not in the trace)') as process_group,
    phase,
    any_value(group_desc) as group_desc,
    count(distinct rank) as ranks,
    sum(collectives) as collectives,
    sum(communication_ns) as communication_ns,
    sum(exposed_ns) as exposed_ns,
    max(exposed_step_ratio) as worst_exposed_step_ratio
from comm_by_group
where run_id = $run_id
group by all
order by exposed_ns desc, process_group, phase
