-- One row per trace whose runtime calls carry their own correlation id as External id (PyTorch ~1.13 and the
-- kineto of its time): every runtime call that has both ids has them equal, so an External id names no op, or
-- another op whose id collides with it. Such a trace's GPU activities are linked to ops by the launch's time and
-- thread (int_op_tree_ranges), and the parser reports it (quality code degenerate_external_ids). A modern trace's
-- runtime calls carry the External id of the op around them: equal ids there are a coincidence of a few calls.
-- grain: trace_id
-- column: runtime_calls: the runtime calls with both ids
-- materialized: view
select trace_id, count(*) as runtime_calls
from runtime_calls
where correlation is not null and external_id is not null
group by trace_id
having bool_and(external_id = correlation)
