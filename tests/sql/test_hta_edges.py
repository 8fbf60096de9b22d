"""HTA marts where HTA 0.5.0 is wrong or silent (issue 36), on hand-written traces of the patterns real traces
showed, with HTA itself run on the same files where it is right.

- Negative times: HTA rounds an event to integer µs (ceil of the start, floor of the end), so an event under a µs
  lasts -1 µs; a sub-µs memset alone between kernels (22 of them on TraceLens' H100 Qwen1.5-0.5B inference trace,
  AMD-AGI/TraceLens tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz, MIT) took its µs off the GPU's busy
  time but not off the computation time: temporal_breakdown.non_compute_ns = -17 µs, where HTA stops on its own
  ``assert non_compute_time >= 0``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from diag_fixtures import cpu_op, kernel, launch, memory_op, write_trace  # noqa: E402
from gpu_marts_helpers import build_lake, read_mart  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning", "ignore::RuntimeWarning")

MEMSET = "Memset (Device)"


def _inference_events(memset_ts_us: float) -> list[dict]:
    """Two 10 µs GEMM kernels [10, 20] and [30, 40] µs and a 0.7 µs memset at ``memset_ts_us``."""
    return [
        cpu_op("aten::mm", 0, 60, 1),
        launch(1, 2, 1), kernel("gemm", 10, 10, 1),
        launch(3, 2, 2, "cudaMemsetAsync"), memory_op(MEMSET, memset_ts_us, 0.7, 2, 7, 10.0),
        launch(5, 2, 3), kernel("gemm", 30, 10, 3),
    ]


def _hta(folder: Path):  # -> hta TraceAnalysis
    from hta.trace_analysis import TraceAnalysis

    logging.getLogger("hta").setLevel(logging.ERROR)
    return TraceAnalysis(trace_dir=str(folder))


@pytest.fixture(scope="module")
def hta_edges(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, list[dict]]]]:
    root = tmp_path_factory.mktemp("hta_edges")
    src = root / "src"
    # the memset between the kernels ([21, 20] in HTA's µs), and inside the first one (absorbed: HTA is right)
    write_trace(src / "sub_us_memset_alone", 0, 1, _inference_events(20.2))
    write_trace(src / "sub_us_memset_inside", 0, 1, _inference_events(12.2))
    marts = {"temporal_breakdown", "kernel_type_breakdown"}
    build_lake(src, root / "lake", marts)
    rows: dict[str, dict[str, list[dict]]] = {}
    for mart in marts:
        for row in read_mart(root / "lake", mart):
            rows.setdefault(mart, {}).setdefault(row["run_id"], []).append(row)
    return src, rows


def test_sub_us_event_alone_takes_no_time(hta_edges) -> None:
    """Busy: the kernels' 20 µs and the memset's 0 (not -1): idle 10 of the 30 µs span, non-compute 0."""
    src, rows = hta_edges
    (ours,) = rows["temporal_breakdown"]["sub_us_memset_alone"]
    assert (ours["idle_ns"], ours["compute_ns"], ours["non_compute_ns"], ours["kernel_ns"]) == (
        10_000, 20_000, 0, 30_000)
    with pytest.raises(AssertionError):  # HTA: non_compute_time = -1 µs
        _hta(src / "sub_us_memset_alone").get_temporal_breakdown(visualize=False)


def test_sub_us_event_inside_a_kernel_as_hta(hta_edges) -> None:
    src, rows = hta_edges
    (ours,) = rows["temporal_breakdown"]["sub_us_memset_inside"]
    ref = _hta(src / "sub_us_memset_inside").get_temporal_breakdown(visualize=False).iloc[0]
    assert (ours["idle_ns"], ours["compute_ns"], ours["non_compute_ns"], ours["kernel_ns"]) == tuple(
        int(ref[c] * 1000) for c in ("idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)"))


def test_no_negative_duration_in_the_hta_marts(hta_edges) -> None:
    _, rows = hta_edges
    for mart, runs in rows.items():
        for run_rows in runs.values():
            for row in run_rows:
                assert all(v >= 0 for k, v in row.items() if k.endswith("_ns")), (mart, row)
