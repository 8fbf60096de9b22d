-- One row per step of a trace that has communication: its wall time split as torch-tb-profiler's
-- "Computation/Communication Overview" legend shows it. computation = kernels (CPU ops when the trace has no
-- kernel), communication = the nccl:*/gloo:* op ranges and their kernels, both clipped to the step; computation_ns
-- and communication_ns EXCLUDE their overlap, which is overlapping_ns; other_ns = the rest of the step.
-- grain: run_id, rank, step, trace_id
-- source: torch-tb-profiler 0.4.3 Distributed view (overall_parser.py OverallParser.aggregate, run_generator.py _generate_overlap_graph); ANCHORS.md §3.7
-- column: computation_ns: computation not overlapped by communication
-- column: overlapping_ns: computation and communication at once
-- column: communication_ns: communication not overlapped by computation (exposed)
-- column: other_ns: neither
-- column: total_ns: the step's wall time
with

trace_roles as (
    select
        run_id,
        trace_id,
        bool_or(role = 0) as has_kernel,
        bool_or(role = 3) as has_communication
    from int_tb_role_ranges
    group by run_id, trace_id
),

per_step as (
    select
        int_tb_step_segments.run_id,
        int_tb_step_segments.trace_id,
        int_tb_step_segments.step,
        sum(seg_ns) filter (where case when has_kernel then kernel_active else cpu_active end) as computation_ns,
        sum(seg_ns) filter (where comm_active) as communication_ns,
        sum(seg_ns) filter (where comm_active and case when has_kernel then kernel_active else cpu_active end)
            as overlap_ns
    from int_tb_step_segments
    join trace_roles using (run_id, trace_id)
    group by all
),

steps as (
    select int_steps.*
    from int_steps
    semi join trace_roles
        on int_steps.run_id = trace_roles.run_id
        and int_steps.trace_id = trace_roles.trace_id
        and trace_roles.has_communication
),

totals as (
    select
        steps.run_id,
        steps.rank,
        steps.step,
        steps.trace_id,
        steps.end_ns - steps.start_ns as total_ns,
        coalesce(per_step.computation_ns, 0) as computation_ns,
        coalesce(per_step.communication_ns, 0) as communication_ns,
        coalesce(per_step.overlap_ns, 0) as overlap_ns
    from steps
    left join per_step using (run_id, trace_id, step)
)

select
    run_id,
    rank,
    step,
    (computation_ns - overlap_ns)::bigint as computation_ns,
    overlap_ns::bigint as overlapping_ns,
    (communication_ns - overlap_ns)::bigint as communication_ns,
    (total_ns + overlap_ns - computation_ns - communication_ns)::bigint as other_ns,
    trace_id,
    total_ns
from totals
