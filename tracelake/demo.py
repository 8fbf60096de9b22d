"""``tracelake demo``: real traces from torch on the CPU plus shipped GPU samples, ingested and reported."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from pipelines.shipped import shipped_folder
from tracelake.ingest import ingest
from tracelake.output import write_result
from tracelake.query import run_query

SAMPLE_TRACES = shipped_folder("tracelake", "sample_traces", "examples/traces", must_hold="README.md")

_REPORT_QUERIES = {
    "Runs in the lake": "select run_id, trace_count, ranks, world_size, backend, device_name from runs order by run_id",
    "Sample query: the five longest kernel names by total GPU time": """
        select run_id, left(name, 60) as kernel, count(*) as calls, sum(dur_ns) / 1e6 as total_ms
        from kernels group by all order by total_ms desc limit 5""",
    "Where the time goes in the demo's model code (source_stats, CPU-only: host time)": """
        select source_file, source_line, function, calls, total_cpu_ns / 1e6 as total_cpu_ms
        from source_stats where run_id = 'cpu_vit' order by total_cpu_ns desc limit 5""",
    "Model FLOPs per step (step_mfu; the CPU runs have no GPU peak, so no MFU ratio)": """
        select run_id, rank, step, model_flops / 1e9 as model_gflops, achieved_tflops_per_s, mfu_ratio
        from step_mfu order by run_id, rank, step limit 6""",
    "Exposed communication by process group and phase (comm_by_group, all ranks and steps)": """
        select run_id, process_group, group_desc, phase, sum(collectives) as collectives,
            sum(communication_ns) / 1e6 as communication_ms, sum(exposed_ns) / 1e6 as exposed_ms
        from comm_by_group group by all order by run_id, process_group, phase""",
    "Pipeline bubble per stage (pipeline_stages)": """
        select run_id, rank, step, stage, bubble_ratio, ideal_bubble_ratio, wait_ns / 1e6 as wait_ms
        from pipeline_stages order by run_id, stage""",
}


def run_demo(*, lake_url: str, traces_dir: str) -> int:
    """Make the demo traces, ingest them into ``lake_url``, and print a short report."""
    from tracelake.workloads import (  # torch loads slowly
        PARALLEL_GROUPS_RUN_ID,
        PIPELINE_RUN_ID,
        profile_attribution,
        profile_gloo_job,
        profile_parallel_groups_job,
        profile_pipeline_job,
        profile_single_process,
    )

    traces = Path(traces_dir)
    started = time.perf_counter()
    print(f"profiling a small MLP on the CPU into {traces}/cpu_mlp ...", flush=True)
    profile_single_process(str(traces), run_id="cpu_mlp")
    print(f"profiling a small vision transformer with stacks, modules, shapes and FLOPs into {traces}/cpu_vit ...",
          flush=True)
    profile_attribution(str(traces), run_id="cpu_vit")
    print(f"profiling a 2-rank gloo DDP job (uneven work per rank) into {traces}/gloo_ddp ...", flush=True)
    profile_gloo_job(str(traces), run_id="gloo_ddp", world_size=2)
    print(f"profiling a 4-rank tensor x data parallel job (TP and DP process groups) into "
          f"{traces}/{PARALLEL_GROUPS_RUN_ID} ...", flush=True)
    profile_parallel_groups_job(str(traces), run_id=PARALLEL_GROUPS_RUN_ID)
    print(f"profiling a 2-stage pipeline (torch.distributed.pipelining, GPipe, 4 micro-batches) into "
          f"{traces}/{PIPELINE_RUN_ID} ...", flush=True)
    profile_pipeline_job(str(traces), run_id=PIPELINE_RUN_ID, stages=2, schedule_name="gpipe", microbatches=4)
    for run in sorted(SAMPLE_TRACES.iterdir()):
        if run.is_dir():
            shutil.copytree(run, traces / run.name, dirs_exist_ok=True)
    print(f"added the shipped sample GPU traces ({SAMPLE_TRACES})", flush=True)
    code = ingest(str(traces), lake_url)
    for title, query in _REPORT_QUERIES.items():
        print(f"\n{title}:")
        write_result(*run_query(query, lake_url), "table")
    print(
        f"\ndone in {time.perf_counter() - started:.0f} s. Next:\n"
        f'  tracelake sql "select * from step_breakdown" --lake {lake_url}\n'
        f"  tracelake ui --lake {lake_url} --source {traces_dir}   # the Dagster UI at http://127.0.0.1:3000"
    )
    return code
