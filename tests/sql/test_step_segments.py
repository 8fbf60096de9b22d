"""int_tb_step_segments runs its running sums per slab of time, so that no window partition holds a whole trace."""

from __future__ import annotations

from pathlib import Path

from pipelines.lake.lake import Lake
from pipelines.sources import discover_runs
from tests.sql.gpu_marts_helpers import query_model
from transforms.composition.ingest import ingest_run

SEGMENTS = "select * from int_tb_step_segments order by all"


def test_cutting_a_trace_into_slabs_changes_no_segment(shared_traces: Path, tmp_path: Path) -> None:
    # resnet50: two real traces of about 85,000 boundary points each, one slab at the default size
    (run,) = [r for r in discover_runs(str(shared_traces)) if r.run_id == "tb_plugin_resnet50"]
    lake = Lake(str(tmp_path / "lake"))
    ingest_run(run, lake)

    def segments(slab_points: int) -> list[tuple]:
        sql = f"set variable step_segment_slab_points = {slab_points}; {SEGMENTS}"
        return query_model(lake, run.run_id, "int_tb_step_segments", sql)

    whole = segments(10**12)
    assert len(whole) > 10_000
    assert segments(500) == whole  # about 170 slabs per trace
