-- One row per rank of the run $run_id with communication: its communication time split into waiting for the other
-- ranks (synchronizing) and moving data (comm_sync_by_step, HTA's communication analysis), summed over its steps.
-- grain: run_id, rank
-- source: HTA 0.5.0 communication analysis (sync vs transfer); ANCHORS.md §2.4
-- column: steps: steps with communication
-- column: communication_ns: union of the steps' communication ranges
-- column: synchronizing_ns: time waiting for other ranks
-- column: data_transfer_ns: time moving data
-- column: synchronizing_ratio: synchronizing_ns / communication_ns
select
    run_id,
    rank,
    count(*) as steps,
    sum(communication_ns) as communication_ns,
    sum(synchronizing_ns) as synchronizing_ns,
    sum(data_transfer_ns) as data_transfer_ns,
    sum(synchronizing_ns) / nullif(sum(communication_ns), 0) as synchronizing_ratio
from comm_sync_by_step
where run_id = $run_id
group by run_id, rank
order by rank
