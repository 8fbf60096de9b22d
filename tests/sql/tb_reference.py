"""Run torch-tb-profiler 0.4.3 on trace files and pickle the figures the tb_plugin mart tests compare with.

Executed as a script (``python tb_reference.py OUT.pkl RUN=PATH[,PATH...] ...``) so that the tests can run it in
child processes next to their own ingest: tb_plugin parses every file with a full ``json.loads`` and an op tree.
Per file it records tb_plugin's step ranges, step costs, overlap costs and GPU metrics; per run it also runs the
distributed view (``RunLoader._process_distributed_profiles``) over the run's files grouped by span, as the loader
does. Times are tb_plugin's own microseconds.
"""

from __future__ import annotations

import logging
import pickle
import re
import sys
from collections import defaultdict
from pathlib import Path

from torch_tb_profiler import consts
from torch_tb_profiler.profiler import data as tb_data
from torch_tb_profiler.profiler import trace as tb_trace
from torch_tb_profiler.profiler.data import DistributedRunProfileData, RunProfileData
from torch_tb_profiler.profiler.event_parser import ProfileRole
from torch_tb_profiler.profiler.loader import RunLoader
from torch_tb_profiler.profiler.trace import EventTypes

_HTA_COMMUNICATION = re.compile(r"nccl.*Kernel")  # hta/utils/utils.py get_kernel_type, as re.match

_parsers: list = []


class _RecordingEventParser(tb_data.EventParser):
    """tb_plugin's own EventParser, remembered so that its final step ranges can be read afterwards.

    One deliberate difference is applied (our marts share one classification of communication kernels): tb_plugin
    counts a kernel as Communication only when its External id is a nccl:*/gloo:* op's, so NCCL kernels launched by
    record_param_comms (their own External id) or ROCm kernels (none) were computation to it. Here a kernel that
    HTA's get_kernel_type calls COMMUNICATION (``^nccl.*Kernel``) takes the Communication role in the step partition,
    as the marts do; every other role, and the communication nodes, stay tb_plugin's.

    A second: recent PyTorch records the DataLoader (``enumerate(DataLoader)#...__next__``) as a user_annotation,
    which tb_plugin's create_trace_event drops before its step parser (which would count it as DataLoader) sees it;
    here those annotations reach the step parser (and nothing else), as in int_tb_role_ranges.
    """

    def __init__(self) -> None:
        super().__init__()
        _parsers.append(self)

    def _parse_step(self, event, comm_nodes) -> None:
        if event.type == EventTypes.KERNEL and event.external_id not in comm_nodes and _HTA_COMMUNICATION.match(event.name):
            self.role_ranges[ProfileRole.Communication].append((event.ts, event.ts + event.duration))
            self.global_min_ts = min(self.global_min_ts, event.ts)
            self.global_max_ts = max(self.global_max_ts, event.ts + event.duration)
            return
        super()._parse_step(event, comm_nodes)

    def parse_steps(self, events, comm_nodes) -> None:
        loaders = [tb_trace.OperatorEvent(EventTypes.USER_ANNOTATION, raw) for raw in _loader_annotations]
        super().parse_steps([*events, *loaders], comm_nodes)


_loader_annotations: list[dict] = []
_create_trace_event = tb_trace.create_trace_event


def _recording_create_trace_event(event, is_pytorch_lightning):
    name = event.get("name") or ""
    if (str(event.get("cat")).lower() == "user_annotation"
            and ((name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__"))
                 or name.startswith("enumerate(DataPipe)#"))):
        _loader_annotations.append(event)
    return _create_trace_event(event, is_pytorch_lightning)


tb_trace.create_trace_event = _recording_create_trace_event  # create_event looks it up in its module at call time
tb_data.EventParser = _RecordingEventParser  # data.py looks the class up in its module at call time


def _figures(path: str) -> tuple[dict, DistributedRunProfileData | None]:
    _parsers.clear()
    _loader_annotations.clear()
    try:
        profile = RunProfileData.parse(Path(path).name, None, path, "/tmp")
    except Exception as exc:  # tb_plugin fails on some inputs; the tests skip those
        return {"error": repr(exc)}, None
    parser = _parsers[-1]
    gpu = profile.gpu_metrics_parser
    gpus = {}
    for gpu_id in sorted(gpu.gpu_ids):
        gpus[gpu_id] = {
            "utilization": gpu.gpu_utilization[gpu_id],
            "sm_efficiency": gpu.avg_approximated_sm_efficiency_per_device[gpu_id],
            "occupancy": gpu.avg_occupancy_per_device[gpu_id],
            "buckets": list(gpu.gpu_util_buckets[gpu_id]),
            "sm_ranges": list(gpu.approximated_sm_efficiency_ranges[gpu_id]),
        }
    figures = {
        "steps": list(zip(profile.steps_names, parser.steps, strict=True)),
        "costs": [list(c.costs) for c in profile.steps_costs],
        "overlap": [(c.computation, c.overlap, c.communication, c.other) for c in profile.comm_overlap_costs],
        "has_communication": profile.has_communication,
        "comm_nodes": len(profile.comm_node_list or []),
        "gpus": gpus,
        "recommendations": list(profile.recommendations),
    }
    return figures, DistributedRunProfileData(profile)


def _distributed(profiles: list[DistributedRunProfileData]) -> dict | None:
    by_span: dict[str | None, list[DistributedRunProfileData]] = defaultdict(list)
    for p in profiles:
        match = consts.WORKER_PATTERN.match(p.worker)
        by_span[match.group(2) if match else None].append(p)
    result = {}
    for span, group in by_span.items():
        view = RunLoader("reference", "", None)._process_distributed_profiles(group, span)
        if view is None:
            continue
        for p in group:
            result[p.worker] = {
                "wait": {step: workers[p.worker] for step, workers in view.steps_to_wait["data"].items()
                         if step != "all" and p.worker in workers},
                "overlap": {step: workers[p.worker] for step, workers in view.steps_to_overlap["data"].items()
                            if step != "all" and p.worker in workers},
                "ops": view.comm_ops["data"][p.worker]["rows"],
            }
    return result


def main(argv: list[str]) -> None:
    logging.disable(logging.ERROR)
    out, specs = argv[0], argv[1:]
    result: dict = {"files": {}, "distributed": {}}
    for spec in specs:
        run_id, paths = spec.split("=", 1)
        profiles = []
        for path in paths.split(","):
            figures, dist = _figures(path)
            result["files"][path] = figures
            if dist is not None:
                profiles.append(dist)
        result["distributed"][run_id] = _distributed(profiles)
    with open(out, "wb") as f:
        pickle.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1:])
