"""recommendations' rules from comm_by_group and pipeline_stages: a process group exposing communication over a tenth
of the step time (a hand-built NCCL rank with a TP and a DP group, numbers by hand), and pipeline stages idling
well beyond the schedule's ideal bubble (a 2-stage GPipe job made here whose second stage does four times the
first's work)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from comm_fixtures import tp_dp_nccl_rank
from gpu_marts_helpers import build_lake, read_mart

from tracelake.workloads import profile_pipeline_job

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")


@pytest.fixture(scope="module")
def fired(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    src = tmp_path_factory.mktemp("parallel_rules_src")
    tp_dp_nccl_rank(src / "tp_dp_nccl")
    # stage 1 holds each micro-batch 40 ms forward and 80 ms backward, stage 0 10 and 20 ms: stage 0 idles
    profile_pipeline_job(str(src), run_id="unbalanced", stages=2, microbatches=4, steps=2, hold_ms=(10.0, 40.0))
    lake = tmp_path_factory.mktemp("parallel_rules_lake")
    build_lake(src, lake, {"recommendations", "pipeline_stages"})
    rows: dict[str, list[dict]] = {}
    for row in read_mart(lake, "recommendations"):
        rows.setdefault(row["run_id"], []).append(row)
    stages = {r["rank"]: r for r in read_mart(lake, "pipeline_stages")}
    return rows, stages


def test_group_exposing_over_a_tenth_of_the_step(fired) -> None:
    rows, _ = fired
    # The 1000 µs step exposes TP 100 µs (its forward all-reduce; its backward one is hidden) and DP 130 µs (100 in
    # backward, 30 in the optimizer step): DP crosses 10 %, TP sits on it.
    (rule,) = [r for r in rows["tp_dp_nccl"] if r["rule"] == "exposed_group_communication"]
    assert (rule["metric"], rule["threshold"], rule["severity"], rule["source"]) == (
        "exposed_step_ratio", 0.1, "warning", "tracelake")
    assert rule["metric_value"] == pytest.approx(0.13)
    assert "process group 3 (DP, ranks [0, 2])" in rule["message"] and "most of it in backward" in rule["message"]


def test_stages_idling_beyond_the_ideal_bubble(fired) -> None:
    rows, stages = fired
    ideal = 1 / (4 + 1)  # 2 stages, 4 micro-batches
    by_rank = {r["rank"]: r for r in rows["unbalanced"] if r["rule"] == "pipeline_bubble"}
    # Stage 0 computes 4 x 30 ms of a step that stage 1's 4 x 120 ms stretch past 480 ms: it idles about 3/4 of it.
    # Stage 1 is busy but for the first micro-batch's 10 ms at stage 0: below the ideal plus the margin.
    assert set(by_rank) == {0}
    rule = by_rank[0]
    assert rule["metric_value"] == pytest.approx(stages[0]["bubble_ratio"]) and rule["metric_value"] > 0.6
    assert rule["threshold"] == pytest.approx(ideal + 0.1)
    assert "Pipeline stage 0 idles" in rule["message"] and "2-stage schedule with 4 micro-batches" in rule["message"]
    assert stages[1]["bubble_ratio"] < ideal + 0.1
