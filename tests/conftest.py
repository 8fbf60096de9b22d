"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_TRACES = Path(os.environ.get("TRACELAKE_SHARED_TRACES", REPO.parent / "shared" / "traces"))


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The real public Kineto traces in ../shared/traces (see its README)."""
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"shared traces not found at {SHARED_TRACES} (set TRACELAKE_SHARED_TRACES)")
    return SHARED_TRACES
