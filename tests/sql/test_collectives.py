"""The collectives mart on hand-built multi-rank NCCL fixtures, with expected numbers worked out by hand.

Each fixture is a run folder with one minimal Kineto JSON trace per rank (distributedInfo + NCCL kernels carrying
collective args). Definitions (TraceLens NcclAnalyser): latency = min dur over ranks; wait_r = max start - start_r;
start/end skew = max - min of start/end; algbw = bytes / 2^30 / latency_s; busbw = algbw x 2(n-1)/n (all-reduce),
x (n-1)/n (all-gather, reduce-scatter, all-to-all), x1 otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from pipelines.lake.lake import Lake
from pipelines.sources import discover_runs
from transforms.composition.ingest import ingest_run

BASE_NS = 1_700_000_000_000_000_000
GIB = 1024**3


def nccl_kernel(ts_us, dur_us, corr, collective, nelems_in, nelems_out, dtype, pg, pg_ranks, seq=None, stream=20):
    args = {
        "device": 0,
        "stream": stream,
        "correlation": corr,
        "External id": corr,
        "Collective name": collective,
        "In msg nelems": nelems_in,
        "Out msg nelems": nelems_out,
        "Group size": len(pg_ranks),
        "dtype": dtype,
        "Process Group Name": pg,
        "Process Group Ranks": str(pg_ranks),
    }
    if seq is not None:
        args["Seq"] = seq
    return {
        "ph": "X", "cat": "kernel", "name": f"ncclDevKernel_{collective}", "pid": 0, "tid": stream,
        "ts": ts_us, "dur": dur_us, "args": args,
    }


def write_rank(folder: Path, rank: int, world_size: int, events: list[dict]) -> None:
    trace = {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world_size},
        "traceEvents": events,
        "baseTimeNanoseconds": BASE_NS,
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"rank-{rank}.json").write_text(json.dumps(trace, indent=1))


def build_fixtures(root: Path) -> None:
    # equal: 2 ranks, PG "0" = [0, 1], two all-reduces with Seq, Float x 1048576 = 4 MiB.
    for rank, spans in {0: [(1000, 100), (2000, 50)], 1: [(1010, 90), (2030, 20)]}.items():
        events = [
            nccl_kernel(ts, dur, 100 + i, "allreduce", 1048576, 1048576, "Float", "0", [0, 1], seq=i)
            for i, (ts, dur) in enumerate(spans)
        ]
        write_rank(root / "equal", rank, 2, events)
    # missing_rank: PG "0" = [0, 1, 2], rank 2's trace is absent; one all-gather, in 1024 / out 3072 Float.
    for rank, (ts, dur) in {0: (100, 40), 1: (120, 30)}.items():
        events = [nccl_kernel(ts, dur, 7, "allgather", 1024, 3072, "Float", "0", [0, 1, 2], seq=0)]
        write_rank(root / "missing_rank", rank, 3, events)
    # unequal: PG "0" = [0, 1], no Seq (matched by order), rank 0 has 3 broadcasts, rank 1 only 2; Long x 128.
    for rank, spans in {0: [(10, 10), (30, 5), (50, 2)], 1: [(12, 8), (31, 4)]}.items():
        events = [
            nccl_kernel(ts, dur, 200 + i, "broadcast", 128, 128, "Long", "0", [0, 1])
            for i, (ts, dur) in enumerate(spans)
        ]
        write_rank(root / "unequal", rank, 2, events)
    # two_groups: 4 ranks; world PG "0" all-reduce Seq 0 on all; PG "1" = [0, 1] and PG "2" = [2, 3] all-reduce
    # Seq 0 each (same seq, different groups); Float x 262144 = 1 MiB.
    world = {0: (100, 50), 1: (110, 40), 2: (105, 45), 3: (120, 30)}
    sub = {0: ("1", [0, 1], 200, 10), 1: ("1", [0, 1], 204, 6), 2: ("2", [2, 3], 300, 8), 3: ("2", [2, 3], 300, 10)}
    for rank in range(4):
        pg, members, ts, dur = sub[rank]
        events = [
            nccl_kernel(*world[rank], 1, "allreduce", 262144, 262144, "Float", "0", [0, 1, 2, 3], seq=0),
            nccl_kernel(ts, dur, 2, "allreduce", 262144, 262144, "Float", pg, members, seq=0, stream=21),
        ]
        write_rank(root / "two_groups", rank, 4, events)
    # partial_seq: PG "0" = [0, 1], two all-reduces; rank 0's carry Seq 5 and 6, rank 1's none (ranks of different
    # builds): the group is matched by order on both, never Seq 5 on one rank against position 0 on the other.
    for rank, seqs in {0: [5, 6], 1: [None, None]}.items():
        events = [
            nccl_kernel(100 * (i + 1) + rank, 10, 300 + i, "allreduce", 256, 256, "Float", "0", [0, 1], seq=seq)
            for i, seq in enumerate(seqs)
        ]
        write_rank(root / "partial_seq", rank, 2, events)
    # cpu_fallback: no NCCL kernel args, so the record_param_comms cpu_ops are the instances ('wait' is not one).
    for rank, (ts, dur) in {0: (500, 20), 1: (505, 15)}.items():
        comm = nccl_kernel(ts, dur, 9, "allreduce", 1024, 1024, "Half", "0", [0, 1])
        comm.update(cat="cpu_op", name="record_param_comms", pid=1, tid=1)
        wait = dict(comm, ts=ts + dur + 1, dur=1, args=dict(comm["args"], **{"Collective name": "wait"}))
        write_rank(root / "cpu_fallback", rank, 2, [comm, wait])


@pytest.fixture(scope="module")
def collectives_marts(tmp_path_factory: pytest.TempPathFactory):
    """Ingest the four fixture runs and build the collectives mart; rows keyed by (run, rank, pg, seq)."""
    root = tmp_path_factory.mktemp("collectives_src")
    build_fixtures(root)
    lake = Lake(str(tmp_path_factory.mktemp("collectives_lake")))
    results, rows = {}, {}
    for run in discover_runs(str(root)):
        (results[run.run_id],) = ingest_run(run, lake, select={"collectives"}).marts
        rel = duckdb.sql(f"select * from read_parquet('{lake.url}/marts/collectives/run_id={run.run_id}/*.parquet')")
        for row in rel.fetchall():
            r = dict(zip(rel.columns, row, strict=False))
            rows[(run.run_id, r["rank"], r["process_group"], r["seq"])] = r
    return results, rows


def check(results, run_id: str, name: str):
    return next(c for c in results[run_id].checks if c.name == name)


def test_equal_counts(collectives_marts):
    results, rows = collectives_marts
    assert results["equal"].row_count == 4
    assert check(results, "equal", "all_ranks_matched").passed
    msg = 1048576 * 4  # Float = 4 bytes -> 4 MiB
    # seq 0: r0 [1000, 1100] µs, r1 [1010, 1100]: latency min(100, 90) = 90 µs; wait r0 = 10 µs, r1 = 0;
    # start skew 10 µs, end skew 0; algbw = 4 MiB / 2^30 / 90e-6 s = 0.00390625 / 9e-5 = 43.4027... GB/s;
    # busbw = algbw x 2(2-1)/2 = algbw.
    r0, r1 = rows[("equal", 0, "0", 0)], rows[("equal", 1, "0", 0)]
    assert (r0["name"], r0["msg_bytes"], r0["dur_ns"], r1["dur_ns"]) == ("allreduce", msg, 100_000, 90_000)
    assert (r0["wait_ns"], r1["wait_ns"]) == (10_000, 0)
    assert (r0["start_skew_ns"], r0["end_skew_ns"]) == (10_000, 0)
    assert r0["algbw_gbps"] == pytest.approx(0.00390625 / 90e-6)
    assert r0["busbw_gbps"] == pytest.approx(0.00390625 / 90e-6)
    assert r0["start_ns"] == BASE_NS + 1_000_000 and r0["end_ns"] == BASE_NS + 1_100_000
    # seq 1: r0 [2000, 2050], r1 [2030, 2050]: latency 20 µs; wait r0 = 30 µs; skews 30 / 0 µs;
    # algbw = 0.00390625 / 20e-6 = 195.3125 GB/s.
    r0, r1 = rows[("equal", 0, "0", 1)], rows[("equal", 1, "0", 1)]
    assert (r0["wait_ns"], r1["wait_ns"], r1["start_skew_ns"], r1["end_skew_ns"]) == (30_000, 0, 30_000, 0)
    assert r1["algbw_gbps"] == pytest.approx(195.3125)
    assert {r["matched_ranks"] for r in (r0, r1)} == {2}
    assert {r["match_rule"] for r in rows.values() if r["run_id"] == "equal"} == {"seq"}


def test_missing_rank_degrades_and_is_flagged(collectives_marts):
    results, rows = collectives_marts
    # PG [0, 1, 2] but only ranks 0 and 1 have traces: both rows are kept, matched over 2 of 3 ranks.
    r0, r1 = rows[("missing_rank", 0, "0", 0)], rows[("missing_rank", 1, "0", 0)]
    assert (r0["matched_ranks"], r0["expected_ranks"]) == (2, 3)
    # r0 [100, 140] µs, r1 [120, 150]: latency 30 µs; wait r0 = 20 µs; start skew 20 µs; end skew 10 µs.
    assert (r0["wait_ns"], r1["wait_ns"], r0["start_skew_ns"], r0["end_skew_ns"]) == (20_000, 0, 20_000, 10_000)
    # all-gather uses Out nelems: 3072 x 4 = 12288 bytes; algbw = 12288 / 2^30 / 30e-6 = 0.3814697265625 GB/s;
    # busbw = algbw x (3-1)/3 (n = Group size 3) = 0.25431315104...
    assert r0["msg_bytes"] == 12288
    assert r0["algbw_gbps"] == pytest.approx(0.3814697265625)
    assert r0["busbw_gbps"] == pytest.approx(0.3814697265625 * 2 / 3)
    failed = check(results, "missing_rank", "all_ranks_matched")
    assert failed.failures == 1 and not failed.passed
    assert failed.sample[0][5:7] == (2, 3)  # (matched, expected) ranks


def test_unequal_counts_match_by_order(collectives_marts):
    results, rows = collectives_marts
    assert results["unequal"].row_count == 5
    # No Seq: matched by order within PG "0". Long = 8 bytes x 128 = 1024 bytes; broadcast busbw factor 1.
    # order 0: r0 [10, 20], r1 [12, 20]: latency 8 µs; wait r0 = 2 µs; algbw = 1024 / 2^30 / 8e-6 = 0.11920928955...
    r0 = rows[("unequal", 0, "0", 0)]
    assert (r0["wait_ns"], r0["start_skew_ns"], r0["end_skew_ns"]) == (2_000, 2_000, 0)
    assert r0["algbw_gbps"] == pytest.approx(1024 / GIB / 8e-6) == pytest.approx(0.11920928955078125)
    assert r0["busbw_gbps"] == pytest.approx(r0["algbw_gbps"])
    # order 1: r0 [30, 35], r1 [31, 35]: latency 4 µs, wait r0 = 1 µs; algbw = 0.2384185791015625.
    assert rows[("unequal", 0, "0", 1)]["wait_ns"] == 1_000
    assert rows[("unequal", 1, "0", 1)]["algbw_gbps"] == pytest.approx(0.2384185791015625)
    # order 2: only rank 0 [50, 52]: matched 1 of 2, latency = its own 2 µs, no wait or skew.
    lone = rows[("unequal", 0, "0", 2)]
    assert (lone["matched_ranks"], lone["wait_ns"], lone["start_skew_ns"]) == (1, 0, 0)
    assert lone["algbw_gbps"] == pytest.approx(0.476837158203125)
    assert ("unequal", 1, "0", 2) not in rows
    assert {r["match_rule"] for r in rows.values() if r["run_id"] == "unequal"} == {"order"}
    failed = check(results, "unequal", "all_ranks_matched")
    assert failed.failures == 1


def test_two_process_groups(collectives_marts):
    results, rows = collectives_marts
    assert results["two_groups"].row_count == 8
    assert check(results, "two_groups", "all_ranks_matched").passed
    # world PG "0" seq 0: starts 100, 110, 105, 120 µs, durs 50, 40, 45, 30 (all end at 150): latency 30 µs;
    # waits 20, 10, 15, 0 µs; start skew 20 µs; end skew 0. 1 MiB: algbw = (1/1024) / 30e-6 = 32.5520833 GB/s;
    # busbw = algbw x 2(4-1)/4 = x1.5 = 48.828125 GB/s.
    world = [rows[("two_groups", r, "0", 0)] for r in range(4)]
    assert [r["wait_ns"] for r in world] == [20_000, 10_000, 15_000, 0]
    assert {(r["start_skew_ns"], r["end_skew_ns"], r["matched_ranks"]) for r in world} == {(20_000, 0, 4)}
    assert world[0]["algbw_gbps"] == pytest.approx(1 / 1024 / 30e-6)
    assert world[0]["busbw_gbps"] == pytest.approx(48.828125)
    # PG "1" = [0, 1] seq 0: [200, 210], [204, 210]: latency 6 µs; wait r0 = 4 µs; skews 4 / 0 µs;
    # algbw = (1/1024) / 6e-6 = 162.7604166 GB/s; busbw x 2(2-1)/2 = x1.
    g1 = [rows[("two_groups", r, "1", 0)] for r in (0, 1)]
    assert [r["wait_ns"] for r in g1] == [4_000, 0]
    assert (g1[0]["start_skew_ns"], g1[0]["end_skew_ns"], g1[0]["matched_ranks"]) == (4_000, 0, 2)
    assert g1[1]["busbw_gbps"] == pytest.approx(1 / 1024 / 6e-6)
    # PG "2" = [2, 3] seq 0: [300, 308], [300, 310]: latency 8 µs; no wait; end skew 2 µs; algbw = 122.0703125.
    g2 = [rows[("two_groups", r, "2", 0)] for r in (2, 3)]
    assert [r["wait_ns"] for r in g2] == [0, 0]
    assert (g2[0]["start_skew_ns"], g2[0]["end_skew_ns"]) == (0, 2_000)
    assert g2[0]["algbw_gbps"] == pytest.approx(122.0703125)


def test_collectives_checks_other_than_matching_pass(collectives_marts):
    results, _ = collectives_marts
    for run_id, mart in results.items():
        assert all(c.passed for c in mart.checks if c.name != "all_ranks_matched"), run_id


def test_cpu_op_fallback(collectives_marts):
    results, rows = collectives_marts
    assert results["cpu_fallback"].row_count == 2
    # record_param_comms r0 [500, 520] µs, r1 [505, 520]: latency 15 µs; wait r0 = 5 µs; Half x 1024 = 2048 bytes;
    # algbw = 2048 / 2^30 / 15e-6 = 0.12715657552083 GB/s; busbw x 2(2-1)/2 = x1.
    r0, r1 = rows[("cpu_fallback", 0, "0", 0)], rows[("cpu_fallback", 1, "0", 0)]
    assert (r0["source"], r0["wait_ns"], r1["wait_ns"], r0["msg_bytes"]) == ("cpu_op", 5_000, 0, 2048)
    assert r1["algbw_gbps"] == pytest.approx(2048 / GIB / 15e-6) == pytest.approx(0.12715657552083333)
    assert r1["busbw_gbps"] == pytest.approx(r1["algbw_gbps"])


def test_seq_on_some_ranks_only_matches_by_order(collectives_marts):
    results, rows = collectives_marts
    partial = {key[1:]: r for key, r in rows.items() if key[0] == "partial_seq"}
    assert sorted(partial) == [(0, "0", 0), (0, "0", 1), (1, "0", 0), (1, "0", 1)]
    assert {(r["match_rule"], r["matched_ranks"]) for r in partial.values()} == {("order", 2)}
    # position 1: r0 starts at 200 µs, r1 at 201 µs: r0 waits 1 µs
    assert partial[(0, "0", 1)]["wait_ns"] == 1_000
    assert check(results, "partial_seq", "all_ranks_matched").passed
