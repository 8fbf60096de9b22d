"""What each table and column means, with units: ``tracelake tables``, the README's guide and reports read it here.

One source per kind of table:
- a mart documents itself in its SQL header (:mod:`transforms.models` reads it): the comment above ``-- grain:``
  says what a row is and how it is defined, and one ``-- column: NAME: meaning`` line per column that
  :data:`COMMON_COLUMNS` does not cover. A new mart adds its own lines; nothing here changes.
- raw tables (written by the parser, not SQL) are described in their registry, :data:`pipelines.tables.RAW_TABLES`.
Units follow from the column-name suffix (:func:`transforms.units.unit_of`), so a doc line never repeats them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.tables import RAW_TABLES
from transforms.models import discover_fleet_views, discover_models

COMMON_COLUMNS: dict[str, str] = {
    "run_id": "the run: the trace folder's path under SOURCE, '/' as '.'",
    "trace_id": "the trace file's name without .json[.gz]; one rank may have several (repeated profiler windows)",
    "rank": "the process's rank in the job (distributedInfo.rank, else from the file name, else 0)",
    "step": "N of the ProfilerStep#N annotation (0 when the trace has none)",
    "device": "device id: the GPU's index, -1 for the CPU (shown as GPU0 / CPU)",
    "stream": "GPU stream id",
    "correlation": "correlation id joining a runtime call to the GPU activity it launched",
    "external_id": "External id joining GPU activity to the CPU op that launched it",
    "event_idx": "the event's position in the trace's traceEvents",
    "name": "the event's or op's name",
    "op_name": "the operator's name (aten::addmm, a user annotation, ProfilerStep*)",
    "kernel_name": "the GPU kernel's full name",
    "kernel_type": "HTA's kernel class: COMPUTATION, COMMUNICATION or MEMORY",
    "calls": "how many times it ran",
    "total_ns": "summed duration",
    "mean_ns": "mean duration per call",
    "min_ns": "shortest call",
    "max_ns": "longest call",
    "dur_ns": "duration",
    "ts_ns": "when it started",
    "start_ns": "when it started",
    "end_ns": "when it ended",
    "pid": "process id in the trace", "tid": "thread id in the trace", "cat": "the event's category in the trace",
    "process_group": "the process group's name (NCCL/gloo communicator)",
    "seq": "the collective's sequence number within its process group",
    "tb_view_enabled": "false where torch-tb-profiler would have hidden this view (ranks did not match)",
}

@dataclass(frozen=True)
class TableDoc:
    """A table's meaning and its columns' meanings."""

    name: str
    layer: str  # raw, marts (built per run) or fleet (views over every run)
    summary: str
    columns: dict[str, str] = field(default_factory=dict)
    source: str = ""  # the anchor the definition follows
    grain: tuple[str, ...] = ()
    differences: tuple[str, ...] = ()  # where it departs from that anchor on purpose (``-- differs:`` lines)


def mart_docs(sql_root: Path | None = None) -> dict[str, TableDoc]:
    """Every mart's doc, from its SQL header (:mod:`transforms.models`)."""
    return {
        name: TableDoc(name, "marts", model.description, model.columns, model.source, model.grain, model.differences)
        for name, model in discover_models(sql_root).items() if model.layer == "marts"
    }


def fleet_docs(sql_root: Path | None = None) -> dict[str, TableDoc]:
    """Every view over all runs' doc, from its SQL header, as marts'."""
    return {
        name: TableDoc(name, "fleet", model.description, model.columns, model.source, model.grain)
        for name, model in discover_fleet_views(sql_root).items()
    }


def all_docs(sql_root: Path | None = None) -> dict[str, TableDoc]:
    """Raw, mart and fleet-view docs by table name."""
    raw = {name: TableDoc(name, "raw", table.summary, table.columns) for name, table in RAW_TABLES.items()}
    return raw | mart_docs(sql_root) | fleet_docs(sql_root)


def differences(sql_root: Path | None = None) -> list[tuple[str, str]]:
    """Every deliberate difference from the anchors, as (table, what and why): the one list that ``tracelake
    tables`` and the README show, kept in the marts' headers beside the definitions it qualifies."""
    return [(name, text) for name, doc in mart_docs(sql_root).items() for text in doc.differences]


def column_doc(doc: TableDoc | None, column: str) -> str:
    """A column's meaning: the table's own line, else the common one, else empty."""
    return (doc.columns.get(column) if doc else None) or COMMON_COLUMNS.get(column, "")


def first_sentence(text: str, limit: int = 160) -> str:
    """The first sentence of a summary, cut at ``limit`` characters."""
    sentence = re.split(r"(?<=\.)\s", text, maxsplit=1)[0].rstrip(".")
    return sentence if len(sentence) <= limit else sentence[: limit - 1] + "…"


DIFFERENCES_TITLE = "Where tracelake differs from the reference tools on purpose (each mart's `-- differs:` lines)"
"""The heading of :func:`differences` in ``tracelake tables`` and the README."""

# Which table answers which question: printed by `tracelake tables` and copied in the README.
GUIDE = """\
Which table answers which question

Where did a step's time go?          step_breakdown (one partition per step: kernel > memcpy > memset >
                                     communication > runtime > dataloader > cpu_exec > other; parts sum to total_ns)
Which kernels / ops cost the most?   kernel_stats (GPU time per kernel), op_stats (CPU and device time per op,
                                     self and total, as prof.key_averages()), memory_by_op (allocations per op)
Is the GPU busy?                     gpu_metrics.gpu_utilization_ratio or temporal_breakdown (see below)
Why is the GPU idle?                 idle_time (per stream: host_wait = CPU enqueued late, kernel_wait = short
                                     gaps between kernels), kernel_launches (launch_delay_ns per launch)
How much memory, and when?           memory_timeline (curve), memory_peaks (peak and the step it fell in)
Which collective, which rank waits?  collectives (per instance and rank: wait_ns, skew, algbw/busbw), comm_ops
What changed between two runs?       tracelake compare A B (run_comparison); the fleet view LAKE/reports/index.html
Did a run regress, across the fleet? run_metrics (per run: headline metrics, median over healthy steps, spread),
                                     run_regressions (each run against its job's previous run: change, noise,
                                     verdict; tracelake check RUN gates CI on it), straggler_history (per job and
                                     rank: straggler in how many of the last 10 runs, on which host)
What is my MFU, per rank and step?   step_mfu (model FLOPs of the step's matrix products, achieved TFLOP/s, the
                                     GPU's dense peak for the step's dtype, mfu_ratio; hardware FLOPs with
                                     recomputation), op_perf.owns_flops (the rows whose FLOPs sum without doubling)
Which group and phase exposes comms? comm_by_group (per process group and forward / backward / optimizer phase:
                                     communication, the exposed part not under computation, bytes, count)
How big are my pipeline bubbles?     pipeline_stages (per stage: compute, send/recv, waiting for the neighbour,
                                     bubble against the schedule's ideal (p-1)/(m+p-1))
What should I fix first?             recommendations (tb_plugin's rules and ours: metric, threshold, advice)
Which rank holds the others up?      stragglers (per rank: arrived last, wait caused, verdict), collectives
What bounds each step?               critical_path (HTA's critical path: cpu, gpu_compute, communication,
                                     launch_sync, idle), step_health (outlier and warmup steps, dead window,
                                     launch delay, profiler overhead)
Which line / layer / shape is slow?  source_stats (innermost frame of my code), module_stats (nn.Module tree),
                                     op_stats_by_shape, annotation_stats (record_function ranges), op_perf (FLOPs,
                                     bytes, roofline bound)
Is the launch queue or copy engine   queue_length_summary (kernels waiting per stream), memory_bw_summary (memcpy
the limit?                           and memset bandwidth per kind), kernel_sequences (repeated launch patterns)

Five "communication" numbers, each answering a different question:
  step_breakdown.communication_ns       communication time NOT hidden under kernels, memcpy or memset (tb_plugin's
                                        Overview priority). Use it for "how much of my step is exposed comms".
  comm_overlap_by_step.communication_ns communication NOT overlapped by computation; overlapping_ns is the hidden
                                        part (tb_plugin's Distributed view). Use it to see the overlap itself.
  comm_sync_by_step                     the communication union split into data_transfer_ns (what the slowest
                                        rank needs to move data) and synchronizing_ns (waiting for other ranks).
                                        Use it to tell a slow network from a straggler.
  comm_comp_overlap.communication_ns    all communication-kernel time (merged over streams) per trace, with
                                        overlap_ratio = the share hidden under computation (HTA). Use it for one
                                        number per trace, comparable with HTA.
  comm_ops / collectives                per op name (calls, bytes, latency, data transfer; tb_plugin) and per
                                        collective instance and rank (wait, skew, bandwidth; TraceLens). Use them
                                        to find which collective and which rank. collectives covers NCCL kernels
                                        with collective args (else record_param_comms ops); torch's gloo backend
                                        records neither, so gloo jobs show in the step and overlap tables only.

Three GPU utilizations:
  gpu_metrics.gpu_utilization_ratio     kernel busy time / [first step start, last step end] (tb_plugin's GPU
                                        summary): steps only, kernels only. Use it for training-loop efficiency.
                                        Without ProfilerStep the steps are found from the trace (step_rule) and
                                        cover the device work they queued, where tb_plugin reads the host span.
  run_metrics step_gpu_utilization_ratio  the median healthy step's kernel share (step_breakdown.
                                        step_gpu_utilization_ratio): warm-up and outlier steps left out; the
                                        fleet view and `tracelake check` show it.
  temporal_breakdown.compute_ratio      compute-kernel time / the whole GPU timeline span (HTA), idle_ratio the rest
                                        idle; counts memcpy, memset and communication as non-compute. Use it to
                                        compare with HTA or for traces without ProfilerStep.
"""


def reference_markdown(sql_root: Path | None = None) -> str:
    """The table reference, ``sql/TABLES.md``: the guide, every table with its grain, anchor, deliberate
    differences and columns, generated from the models' headers and the raw tables' registry (regenerate with
    ``python -m transforms.docs > sql/TABLES.md``; a test keeps it current)."""
    out = ["# Tables", "", "Generated from the SQL models' headers and `pipelines/tables.py` by "
           "`python -m transforms.docs > sql/TABLES.md`; `tracelake tables [TABLE]` prints the same.", "",
           "```", GUIDE.rstrip(), "```", "", f"## {DIFFERENCES_TITLE}", ""]
    out += [f"- `{name}`: {text}" for name, text in differences(sql_root)]
    for layer, title in (("raw", "Raw tables"), ("marts", "Analysis tables"), ("fleet", "Views over every run")):
        out += ["", f"## {title}"]
        for name, doc in sorted(all_docs(sql_root).items()):
            if doc.layer != layer:
                continue
            out += ["", f"### `{name}`", "", doc.summary]
            if doc.grain:
                out += ["", f"Grain: {', '.join(doc.grain)}."]
            if doc.source:
                out += ["", f"Definition follows: {doc.source}."]
            out += [f"- Differs on purpose: {text}" for text in doc.differences]
            if doc.columns:
                out += ["", "| column | meaning |", "|---|---|"]
                out += [f"| `{column}` | {meaning.replace('|', '/')} |" for column, meaning in doc.columns.items()]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(reference_markdown(), end="")
