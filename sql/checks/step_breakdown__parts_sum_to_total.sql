-- The eight parts of every step add up to the step's total time exactly.
select *
from step_breakdown
where kernel_ns + memcpy_ns + memset_ns + communication_ns + runtime_ns + dataloader_ns + cpu_exec_ns + other_ns
    != total_ns
