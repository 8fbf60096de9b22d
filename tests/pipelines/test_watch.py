"""The watcher's listing passes against a real S3 server on loopback (moto), without Dagster."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.watch import WatchState, scan

pytestmark = pytest.mark.usefixtures("s3_server")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "traces"
SMALL = (EXAMPLES / "rocm_mi250" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz").read_bytes()
OTHER = (EXAMPLES / "simple_add" / "alexnet_trace.json.gz").read_bytes()


def _keys(changes):
    return [c.run_key.split("@")[0] for c in changes]


def test_incremental_pass_sees_new_keys_and_full_pass_sees_rewrites(bucket):
    bucket.put("fleet/2026-01-01/rank-0.json.gz", SMALL)
    changes, state, _ = scan(bucket.url("fleet"), None, WatchState(), full_pass_every=3)
    assert _keys(changes) == ["2026-01-01"] and changes[0].is_new

    # Tick 2 (incremental): a new run and a late rank that sorts after every key seen.
    bucket.put("fleet/2026-01-01/rank-1.json.gz", SMALL)
    bucket.put("fleet/2026-01-02/rank-0.json.gz", SMALL)
    changes, state, _ = scan(bucket.url("fleet"), None, state, full_pass_every=3)
    assert _keys(changes) == ["2026-01-01", "2026-01-02"]
    assert [c.is_new for c in changes] == [False, True]

    # Tick 3 (incremental): a rewrite sorts before the newest key, so only a full pass sees it.
    bucket.put("fleet/2026-01-01/rank-0.json.gz", OTHER)
    changes, state, _ = scan(bucket.url("fleet"), None, state, full_pass_every=3)
    assert changes == []
    changes, state, _ = scan(bucket.url("fleet"), None, state, full_pass_every=3)  # tick 4: full
    assert _keys(changes) == ["2026-01-01"]

    # Incremental sums equal a full recount: a fresh full pass agrees on every fingerprint.
    _, fresh, _ = scan(bucket.url("fleet"), None, WatchState())
    assert fresh.runs == state.runs
    assert WatchState.from_cursor(state.to_cursor()) == state
    changes, _, _ = scan(bucket.url("fleet"), None, state, full_pass_every=3)
    assert changes == []
