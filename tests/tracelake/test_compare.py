"""``tracelake compare`` on the shared control/test pair: what got slower, and by how much."""

from __future__ import annotations

import orjson
import polars as pl
import pytest

from tracelake.cli import main
from tracelake.ingest import ingest


@pytest.fixture(scope="module")
def diff_lake(tmp_path_factory, shared_traces):
    lake = tmp_path_factory.mktemp("diff") / "lake"
    assert ingest(str(shared_traces / "trace_diff_pair"), str(lake)) == 0
    return lake


def test_compare_ranks_slowdowns_by_time_per_rank_step(diff_lake, tmp_path, capsys):
    out = tmp_path / "run_comparison.parquet"
    assert main(["compare", "control", "test", "--lake", str(diff_lake), "--format", "json", "--limit", "0",
                 "--out", str(out)]) == 0
    rows = orjson.loads(capsys.readouterr().out)
    table = pl.read_parquet(out)
    assert len(rows) == table.height > 300
    assert {r["kind"] for r in rows} >= {"kernel", "op", "collective", "step"}
    deltas = [r["delta_per_step_ns"] for r in rows]
    assert deltas == sorted(deltas, reverse=True)

    by_key = {(r["kind"], r["name"]): r for r in rows}
    step = by_key[("step", "ProfilerStep")]  # six steps each; the test run's steps take 60 % longer
    assert (step["calls_a"], step["calls_b"]) == (6, 6)
    assert step["change_pct"] == pytest.approx(60.1, abs=0.1)
    assert step["delta_per_step_ns"] == step["per_step_b_ns"] - step["per_step_a_ns"] > 0
    all_reduce = by_key[("collective", "AllReduce")]
    assert (all_reduce["calls_a"], all_reduce["calls_b"]) == (18, 21)
    assert all_reduce["per_step_b_ns"] > 2 * all_reduce["per_step_a_ns"]
    assert rows[0] == step  # the step itself is the largest slowdown


def test_compare_names_an_unknown_run(diff_lake, capsys):
    assert main(["compare", "control", "nope", "--lake", str(diff_lake)]) == 2
    assert "'nope' not in the lake" in capsys.readouterr().err
