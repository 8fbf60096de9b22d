"""pipeline_stages: 2- and 4-stage pipelines (torch.distributed.pipelining over gloo, GPipe and 1F1B) made with torch
here, each with few and with many micro-batches: stages, micro-batch counts and the ideal bubble by hand, every
figure against the one worked out from the raw events, and a bubble that grows with fewer micro-batches."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import comm_reference as ref
from gpu_marts_helpers import build_lake, read_mart

from tracelake.workloads import profile_pipeline_job

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")

US = 1000  # ns
PROFILED_STEP = 1  # steps=2: the second is profiled, as ProfilerStep#1
HOLD_MS = 20  # per micro-batch and stage, forward (backward twice that): well above the shared cores' jitter
# (stages, schedule) -> (few, many) micro-batches; 1F1B needs at least as many micro-batches as stages.
PAIRS = {(2, "gpipe"): (1, 8), (4, "gpipe"): (1, 8), (2, "1f1b"): (2, 10), (4, "1f1b"): (4, 12)}


def _run_id(stages: int, schedule_name: str, microbatches: int) -> str:
    return f"pp{stages}_{schedule_name}_m{microbatches}"


@pytest.fixture(scope="module")
def pipelines(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[int, dict]]]:
    src = tmp_path_factory.mktemp("pipeline_src")
    for (stages, schedule_name), counts in PAIRS.items():
        for microbatches in counts:
            profile_pipeline_job(
                str(src), run_id=_run_id(stages, schedule_name, microbatches), stages=stages,
                schedule_name=schedule_name, microbatches=microbatches, steps=2, hold_ms=HOLD_MS,
            )
    lake = tmp_path_factory.mktemp("pipeline_lake")
    build_lake(src, lake, {"pipeline_stages"})
    rows: dict[str, dict[int, dict]] = {}
    for row in read_mart(lake, "pipeline_stages"):
        rows.setdefault(row["run_id"], {})[row["rank"]] = row
    return src, rows


def test_stages_micro_batches_and_ideal_bubble(pipelines) -> None:
    _, rows = pipelines
    for (stages, schedule_name), counts in PAIRS.items():
        for m in counts:
            got = rows[_run_id(stages, schedule_name, m)]
            # One stage per rank, in rank order; GPipe and 1F1B idle (p - 1) / (m + p - 1) of a step.
            assert {r: (g["step"], g["stage"], g["stages"], g["microbatches"]) for r, g in got.items()} == {
                r: (PROFILED_STEP, r, stages, m) for r in range(stages)
            }
            for g in got.values():
                assert g["ideal_bubble_ratio"] == pytest.approx((stages - 1) / (m + stages - 1))
                assert g["wait_ns"] <= g["send_recv_ns"] and g["compute_ns"] + g["send_recv_ns"] <= g["step_ns"]
                assert g["bubble_ratio"] == pytest.approx(1 - g["compute_ns"] / g["step_ns"])


def test_bubble_grows_with_fewer_micro_batches(pipelines) -> None:
    """The stages idle more of their step with fewer micro-batches, on average by at least half of what the ideal
    schedule does (the rest of a step goes to handing micro-batches over, which the ideal leaves out)."""
    _, rows = pipelines
    for (stages, schedule_name), (few, many) in PAIRS.items():
        sparse, dense = rows[_run_id(stages, schedule_name, few)], rows[_run_id(stages, schedule_name, many)]
        # Ideal: 2 stages 1/2 -> 1/9 (GPipe), 1/3 -> 1/11 (1F1B); 4 stages 3/4 -> 3/11, 3/7 -> 3/15.
        ideal_drop = (stages - 1) / (few + stages - 1) - (stages - 1) / (many + stages - 1)
        drop = sum(sparse[r]["bubble_ratio"] - dense[r]["bubble_ratio"] for r in range(stages)) / stages
        assert drop >= 0.5 * ideal_drop, (stages, schedule_name, drop, ideal_drop)
        # A stage that idles waits for its neighbour: the waiting is most of its time in receives.
        assert all(sparse[r]["wait_ns"] > 0.5 * sparse[r]["send_recv_ns"] for r in range(stages))


@pytest.mark.parametrize("pair", [(4, "1f1b", 4), (2, "gpipe", 8)])
def test_figures_match_the_raw_events(pipelines, pair: tuple[int, str, int]) -> None:
    src, rows = pipelines
    stages, schedule_name, m = pair
    run_id = _run_id(stages, schedule_name, m)
    traces = {r: ref.spans(ref.load(next((src / run_id).glob(f"rank-{r}.*.json.gz")))) for r in range(stages)}
    expected = ref.pipeline_figures(traces, PROFILED_STEP)
    for rank, figures in expected.items():
        got = rows[run_id][rank]
        # The first stage starts by sending; every other stage first receives from the stage before it.
        assert (figures.stage_first_op == "send") == (rank == 0)
        assert rank == 0 or figures.upstream == rank - 1
        assert figures.sends == (m if rank < stages - 1 else 0) + (m if rank > 0 else 0)
        assert abs(got["step_ns"] - figures.step_ns) <= US
        assert abs(got["compute_ns"] - figures.compute) <= US, (rank, got, figures)
        assert abs(got["send_recv_ns"] - figures.send_recv) <= US, (rank, got, figures)
        assert abs(got["wait_ns"] - figures.wait) <= US, (rank, got, figures)

