-- Ranks that did not run a collective that other ranks of its process group ran in the same step (a skipped or
-- hung collective, or ranks on different schedules): the others waited for a partner that never came (in gloo, until
-- the group's timeout). `why` names the step and the rank. The check passes when every traced member of each
-- group ran each of its collectives.
select
    run_id, step, rank,
    'rank ' || rank || ' did not run ' || missed_collectives || ' collective(s) of step ' || step
        || ' that other ranks of its group ran' as why,
    missed_collectives
from straggler_steps
where missed_collectives > 0
