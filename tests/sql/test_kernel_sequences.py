"""kernel_sequences against HTA 0.5.0's get_frequent_cuda_kernel_sequences("aten::", min_pattern_len=2) on the
shared GPU traces where HTA answers (nccl_rank0_of_2 makes its call-stack builder raise; trace_diff_pair has no
rank HTA can read). Patterns and counts agree exactly; GPU and CPU times within HTA's integer-µs rounding."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from pipelines.lake.lake import Lake
from pipelines.lake.read import open_lake
from pipelines.sources import discover_runs
from transforms.composition.ingest import ingest_run

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                                         "ignore::RuntimeWarning")]

# (run folder, trace file under it)
CASES = [
    ("simple_add", "alexnet_trace.json.gz"),
    ("simple_add", "benchmark_result_493459_1694039959_trace.json.gz"),
    ("cuda_sync", "event_sync.json.gz"),
    ("cuda_sync", "event_sync_multi_stream.json.gz"),
]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, shared_traces: Path) -> Lake:
    lake = Lake(str(tmp_path_factory.mktemp("seq_lake")))
    for folder in sorted({c[0] for c in CASES}):
        for run in discover_runs(str(shared_traces / folder)):
            ingest_run(run, lake, select={"kernel_sequences"})
    return lake


def hta_patterns(trace: Path, folder: Path) -> dict[str, tuple[int, float, float]]:
    """HTA's patterns ("op|kernel|..." -> count, GPU µs, CPU µs) on a copy of ``trace`` named rank-0.json.gz."""
    from hta.trace_analysis import TraceAnalysis

    folder.mkdir(parents=True)
    shutil.copy(trace, folder / "rank-0.json.gz")
    logging.getLogger("hta").setLevel(logging.CRITICAL)
    df = TraceAnalysis(trace_dir=str(folder)).get_frequent_cuda_kernel_sequences(
        "aten::", str(folder), min_pattern_len=2, top_k=1000, visualize=False)
    if df.empty:
        return {}
    return {r["pattern"]: (r["count"], r["GPU kernel duration (us)"], r["CPU op duration (us)"])
            for _, r in df.iterrows()}


@pytest.mark.parametrize("case", CASES, ids=[c[1].split(".")[0] for c in CASES])
def test_kernel_sequences_match_hta(case, lake, shared_traces, tmp_path):
    folder, file = case
    ref = hta_patterns(shared_traces / folder / file, tmp_path / "hta")
    rows = open_lake(lake.url).sql(
        "select * from kernel_sequences where run_id = $run and trace_id = $trace",
        params={"run": folder, "trace": file.split(".")[0]})
    ours = {"|".join([r["op_name"], *r["kernels"]]): r for r in (dict(zip(rows.columns, t, strict=False)) for t in rows.fetchall())}
    assert ours, "every case has at least one pattern of two or more GPU events"
    assert set(ours) == set(ref)
    for pattern, (count, gpu_us, cpu_us) in ref.items():
        row = ours[pattern]
        assert row["occurrences"] == count
        assert row["kernel_count"] == len(row["kernels"]) >= 2
        assert (row["first_kernel"], row["last_kernel"]) == (row["kernels"][0], row["kernels"][-1])
        # HTA sums integer-µs durations: each event and each op is off by at most 1 µs.
        assert abs(row["total_ns"] / 1000 - gpu_us) <= count * row["kernel_count"], (pattern, row, gpu_us)
        assert abs(row["op_total_ns"] / 1000 - cpu_us) <= count, (pattern, row, cpu_us)
    hashes = [r["sequence_hash"] for r in ours.values()]
    assert len(set(hashes)) == len(hashes)
