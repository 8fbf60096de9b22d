-- Every collective instance was found on all ranks of its process group (matched_ranks = Group size). Rows
-- returned are instances seen on fewer ranks: a rank's trace is missing, or the ranks recorded unequal numbers
-- of collectives; their wait, skew and bandwidth use only the ranks that matched.
select run_id, process_group, seq, name, matched_ranks, expected_ranks, list(rank order by rank) as ranks_seen
from collectives
where matched_ranks < expected_ranks
group by run_id, process_group, seq, name, matched_ranks, expected_ranks
