-- Collective instances matched across ranks (same process group and seq) whose names differ between ranks: the ranks
-- recorded different collectives at that position (traces matched by order that do not start at the same
-- collective, or kernels named differently), so their wait, skew and stragglers compare unrelated collectives.
-- `why` names each rank's collective.
select
    run_id, process_group, seq,
    'ranks recorded different collectives here: '
        || string_agg(rank || ': ' || name, ', ' order by rank) as why,
    list(distinct name order by name) as names
from collectives
group by run_id, process_group, seq
having count(distinct name) > 1
