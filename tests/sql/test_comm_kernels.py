"""Communication kernels recognised by the collective args the profiler records on them, whatever their name (as
the kernels of NCCL's device API, named by their users), and DeepSeek's DeepEP kernels by name. Traces derived
from the shared NCCL trace (HTA's test data, MIT: rank 0 of a 2-rank job): its NCCL kernels renamed, once keeping
their args (``Collective name``, ``Seq``...) and once as DeepEP's kernels without them."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from gpu_marts_helpers import build_lake, query_model

TRACE = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "nccl_rank0_of_2" / "rank-0.json.gz"
COLLECTIVE_ARGS = ("Collective name", "Seq", "Comms Id", "In msg nelems", "Out msg nelems", "Group size", "dtype",
                   "In split size", "Out split size", "Process Group Name", "Process Group Description",
                   "Process Group Ranks")
DEVICE_API = "void lsa_fused_reduce_kernel<float>(ncclDevComm, float*, unsigned long)"
DEEPEP = "void dpsk::ep::internode::combine<bf16, 8, 4>(void*, int const*, int, int)"


def _derived(out: Path, name: str, keep_args: bool) -> int:
    """The NCCL trace with its NCCL kernels named ``name`` (their collective args kept or dropped); how many."""
    trace = json.loads(gzip.decompress(TRACE.read_bytes()))
    renamed = 0
    for event in trace["traceEvents"]:
        if event.get("cat") == "kernel" and event["name"].startswith("ncclKernel_"):
            event["name"] = name
            if not keep_args:
                for key in COLLECTIVE_ARGS:
                    event["args"].pop(key, None)
            renamed += 1
    out.mkdir(parents=True)
    (out / "rank-0.json").write_text(json.dumps(trace))
    return renamed


def _communication(tmp_path: Path, name: str, keep_args: bool) -> tuple[int, list[tuple]]:
    renamed = _derived(tmp_path / "src" / "run", name, keep_args)
    lake, results = build_lake(tmp_path / "src", tmp_path / "lake", {"runs"})
    rows = query_model(lake, next(iter(results)), "int_kernels_classified",
                       "select kernel_type, count(*) from int_kernels_classified where name = $$" + name
                       + "$$ group by all")
    return renamed, rows


def test_kernels_with_collective_args_are_communication(tmp_path: Path) -> None:
    renamed, rows = _communication(tmp_path, DEVICE_API, keep_args=True)
    assert renamed == 21 and rows == [("COMMUNICATION", 21)]


def test_deepep_kernels_are_communication(tmp_path: Path) -> None:
    renamed, rows = _communication(tmp_path, DEEPEP, keep_args=False)
    assert renamed == 21 and rows == [("COMMUNICATION", 21)]
