"""Hand-built traces of communication patterns, shared by the comm_by_group and recommendations tests."""

from __future__ import annotations

import json
from pathlib import Path

from diag_fixtures import kernel, launch, step, write_trace


def tp_dp_nccl_rank(folder: Path) -> None:
    """Rank 0 of a 4-rank job, TP group "1" = [0, 1] and DP group "3" = [0, 2], one step [1000, 2000) µs:
    forward launches a GEMM [1100, 1300] and a TP all-reduce [1300, 1400] from the main thread; backward (the
    autograd thread 200) a GEMM [1450, 1700], a TP all-reduce [1500, 1550] and a DP all-reduce [1650, 1800]; the
    optimizer step a DP all-reduce [1850, 1900] and an update kernel [1880, 1950]."""

    def allreduce(group: str, desc: str, ranks: list[int], nelems: int) -> dict:
        return {"Collective name": "allreduce", "In msg nelems": nelems, "Out msg nelems": nelems, "dtype": "Float",
                "Group size": len(ranks), "Process Group Name": group, "Process Group Description": desc,
                "Process Group Ranks": str(ranks)}

    tp, dp = ("1", "TP", [0, 1]), ("3", "DP", [0, 2])
    autograd = 200
    events = [
        step(1, 1000, 1000),
        launch(1060, 5, correlation=1),
        kernel("gemm_fwd", 1100, 200, correlation=1),
        launch(1110, 5, correlation=2),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1300, 100, correlation=2, stream=20,
               **allreduce(*tp, nelems=1024)),
        {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: MmBackward0", "pid": 100,
         "tid": autograd, "ts": 1400, "dur": 200, "args": {"External id": 50}},
        {**launch(1410, 5, correlation=3), "tid": autograd},
        kernel("gemm_bwd", 1450, 250, correlation=3),
        {**launch(1420, 5, correlation=4), "tid": autograd},
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1500, 50, correlation=4, stream=20,
               **allreduce(*tp, nelems=1024)),
        {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
         "pid": 100, "tid": autograd, "ts": 1600, "dur": 50, "args": {"External id": 51}},
        {**launch(1610, 5, correlation=5), "tid": autograd},
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1650, 150, correlation=5, stream=21,
               **allreduce(*dp, nelems=4096)),
        {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "pid": 100, "tid": 100,
         "ts": 1800, "dur": 150, "args": {"External id": 52}},
        launch(1810, 5, correlation=6),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1850, 50, correlation=6, stream=21,
               **allreduce(*dp, nelems=2)),
        launch(1820, 5, correlation=7),
        kernel("sgd_update", 1880, 70, correlation=7),
    ]
    path = write_trace(folder, 0, 4, events)
    trace = json.loads(path.read_text())
    trace["distributedInfo"]["pg_config"] = [
        {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 4, "ranks": [0, 1, 2, 3]},
        {"pg_name": "1", "pg_desc": "TP", "backend_config": "cuda:nccl", "pg_size": 2, "ranks": [0, 1]},
        {"pg_name": "3", "pg_desc": "DP", "backend_config": "cuda:nccl", "pg_size": 2, "ranks": [0, 2]},
    ]
    path.write_text(json.dumps(trace, indent=1))
