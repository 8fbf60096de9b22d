-- One row per run and headline metric (run_metrics): the run against its baseline, and the verdict. The baseline is
-- the job's previous run (by started_ns, then run_id), or the run pinned for the job in the DuckDB variable
-- tracelake_baselines (a MAP from job to run_id; a run pinned as its own baseline is compared with its previous run).
-- change_ratio = (value - baseline_value) / baseline_value: signed, a longer time is positive, a lower utilization
-- negative. noise_ratio = sqrt(spread² + baseline spread²): the step-to-step noise of the two runs together, their
-- relative median absolute deviations combined as independent (0 for a metric measured once per run, such as
-- peak_memory_bytes). is_regression: the metric moved the worse way (up where higher_is_worse, else down) by more than
-- the threshold AND by more than the noise; a change inside the noise is not a regression, whatever the threshold.
-- The threshold is the DuckDB variable tracelake_max_regression (a ratio; default 0.05, i.e. 5 %), so that this one
-- definition serves the view and `tracelake check --max-regression`. A run without a baseline (its job's first run), or
-- whose baseline lacks the metric, has null baseline columns and is_regression false.
-- grain: run_id, metric
-- source: tracelake (issue 39): Perfetto's TraceSummarySpec and HTA's trace diff compare two traces; none keeps a baseline
-- column: job: the run's job (run_metrics.job)
-- column: started_ns: when the run started (run_metrics.started_ns)
-- column: baseline_run_id: the run it is compared with: the job's previous run, or the pinned one (null for a job's first run)
-- column: value: the run's value of the metric (run_metrics.value, in the metric's unit)
-- column: baseline_value: the baseline run's value of the metric
-- column: change_ratio: (value - baseline_value) / baseline_value, signed; may exceed 1
-- column: noise_ratio: sqrt(spread² + baseline spread²), the two runs' step-to-step noise together (null without a baseline)
-- column: is_regression: worse by more than tracelake_max_regression (default 5 %) and by more than noise_ratio
-- column: higher_is_worse: the direction that is worse (run_metrics.higher_is_worse)
-- column: max_regression_ratio: the threshold the verdict used
-- column: steps: the healthy steps the run's value is the median of (run_metrics.steps; null for peak_memory_bytes)
with

settings as (
    select
        coalesce(getvariable('tracelake_max_regression'), 0.05)::double as max_regression_ratio,
        cast(getvariable('tracelake_baselines') as map(varchar, varchar)) as pinned
),

job_runs as (
    select distinct run_id, job, started_ns
    from run_metrics
),

baselines as (
    select
        job_runs.run_id,
        coalesce(
            nullif(settings.pinned[job_runs.job], job_runs.run_id),
            lag(job_runs.run_id) over (partition by job_runs.job order by job_runs.started_ns, job_runs.run_id)
        ) as baseline_run_id
    from job_runs
    cross join settings
),

compared as (
    select
        metrics.run_id,
        metrics.metric,
        metrics.job,
        metrics.started_ns,
        baselines.baseline_run_id,
        metrics.value,
        baseline.value as baseline_value,
        (metrics.value - baseline.value) / nullif(baseline.value, 0) as change_ratio,
        if(baseline.value is null, null, sqrt(coalesce(metrics.spread, 0) ** 2 + coalesce(baseline.spread, 0) ** 2))
            as noise_ratio,
        metrics.higher_is_worse,
        metrics.steps
    from run_metrics as metrics
    join baselines using (run_id)
    left join run_metrics as baseline
        on baseline.run_id = baselines.baseline_run_id
        and baseline.metric = metrics.metric
)

select
    compared.run_id,
    compared.metric,
    compared.job,
    compared.started_ns,
    compared.baseline_run_id,
    compared.value,
    compared.baseline_value,
    compared.change_ratio,
    compared.noise_ratio,
    coalesce(
        if(compared.higher_is_worse, compared.change_ratio, -compared.change_ratio) > settings.max_regression_ratio
        and if(compared.higher_is_worse, compared.change_ratio, -compared.change_ratio) > compared.noise_ratio,
        false
    ) as is_regression,
    compared.higher_is_worse,
    settings.max_regression_ratio,
    compared.steps
from compared
cross join settings
