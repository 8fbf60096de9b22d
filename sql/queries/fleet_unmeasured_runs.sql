-- One row per run of the lake that has no headline metrics (no run_metrics row), with why: the fleet view lists
-- these runs too, rather than leaving them out.
-- grain: run_id
-- source: tracelake (issue 46)
-- column: started_ns: the run's earliest event (runs.first_ts_ns)
-- column: why: what the run lacks that every headline metric needs
select
    runs.run_id,
    regexp_replace(runs.run_id, '\.[^.]*$', '') as job,
    runs.first_ts_ns as started_ns,
    case
        when not exists (select 1 from cpu_ops where cpu_ops.run_id = runs.run_id)
            and not exists (select 1 from kernels where kernels.run_id = runs.run_id)
            then 'no operators and no GPU kernels in its traces'
        when not exists (select 1 from step_health where step_health.run_id = runs.run_id)
            then 'no ProfilerStep markers (no step time), no GPU kernels in a step and no memory events'
        else 'no healthy step: every step is flagged as warm-up or outlier (step_health)'
    end as why
from runs
where runs.run_id not in (select run_id from run_metrics)
order by runs.first_ts_ns, runs.run_id
