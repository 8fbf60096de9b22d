"""Session-wide fixtures: real torch traces, made once per session and shared by every test that needs them.

Treat the folders as read-only: other tests ingest them as SOURCE folders.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tracelake.workloads import CPU_RUN_ID, GLOO_RUN_ID, profile_gloo_job, profile_single_process

GLOO_WORLD_SIZE = 2
REPO = Path(__file__).resolve().parent.parent
SHARED_TRACES = Path(os.environ.get("TRACELAKE_SHARED_TRACES", REPO.parent / "shared" / "traces"))


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The real public Kineto traces in ../shared/traces (see its README)."""
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"shared traces not found at {SHARED_TRACES} (set TRACELAKE_SHARED_TRACES)")
    return SHARED_TRACES


def _make_run(root: Path, run_id: str, make: Callable[[str], None], ranks: int) -> Path:
    """Run ``make(root)``, check one trace per rank landed in ``root/run_id``, and fail clearly if not."""
    error = None
    try:
        make(str(root))
    except Exception as exc:  # a failed spawn or profiler: every dependent test reports this one message
        error = exc
    if error is not None:
        pytest.fail(f"could not make the {run_id!r} traces under {root}: {error}", pytrace=False)
    written = [p.name for p in sorted((root / run_id).glob("rank-*.pt.trace.json.gz"))]
    if len(written) != ranks:
        pytest.fail(f"expected {ranks} trace file(s) in {root / run_id}, found {written}", pytrace=False)
    return root


@pytest.fixture(scope="session")
def cpu_traces_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding run ``cpu_mlp/``: one single-process MLP trace, ``rank-0.step5.pt.trace.json.gz``."""
    root = tmp_path_factory.mktemp("cpu_traces")
    return _make_run(root, CPU_RUN_ID, profile_single_process, ranks=1)


@pytest.fixture(scope="session")
def gloo_traces_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding run ``gloo_ddp/``: 2-rank uneven gloo DDP, ``rank-{0,1}.step5.pt.trace.json.gz``.

    Rank 1 computes about 20 ms more per step before the collectives, so rank 0 waits in them.
    """
    root = tmp_path_factory.mktemp("gloo_traces")
    return _make_run(
        root,
        GLOO_RUN_ID,
        lambda url: profile_gloo_job(url, world_size=GLOO_WORLD_SIZE, uneven=True),
        ranks=GLOO_WORLD_SIZE,
    )
