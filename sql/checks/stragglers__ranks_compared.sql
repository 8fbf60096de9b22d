-- Runs with collectives that could not be compared across ranks, so that no rank can be called a straggler, and
-- why: only one rank's trace is in the run (of a larger world), or no collective was found on two ranks.
with

collective_runs as (
    select run_id, max(matched_ranks) as most_matched_ranks
    from collectives
    group by run_id
),

run_ranks as (
    select run_id, list(distinct rank order by rank) as ranks, max(world_size) as world_size
    from traces
    group by run_id
)

select
    run_id,
    case
        when len(ranks) < 2 then
            'only rank(s) ' || ranks::varchar || coalesce(' of world size ' || world_size, '')
            || ' traced in this run: a straggler is found by comparing ranks'
        else 'no collective was matched on two ranks of ' || ranks::varchar
            || ' (by process group and Seq, or their order per process group or stream)'
    end as why
from collective_runs
join run_ranks using (run_id)
where most_matched_ranks < 2
    and run_id not in (select run_id from stragglers)
