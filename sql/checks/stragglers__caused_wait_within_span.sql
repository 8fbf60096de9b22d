-- Ranks said to have caused more wait than the run's collectives lasted: the wait a rank caused is wall time (the
-- union of the collectives' first-to-last arrival intervals it arrived last at), so it fits in the collective span.
select run_id, rank, caused_wait_ns, collective_span_ns
from stragglers
where caused_wait_ns > collective_span_ns
