-- Collectives seen on fewer ranks than their process group holds (matched_ranks < Group size; `why` names the
-- ranks seen). A rank's trace is missing, or the ranks recorded unequal numbers of collectives; their wait, skew
-- and bandwidth use only the ranks that matched. The check passes when every instance is on all ranks.
select
    process_group, seq, name,
    'seen on ranks ' || list(rank order by rank)::varchar || ' of ' || expected_ranks || ' in its group' as why,
    run_id, matched_ranks, expected_ranks, list(rank order by rank) as ranks_seen
from collectives
where matched_ranks < expected_ranks
group by run_id, process_group, seq, name, matched_ranks, expected_ranks
