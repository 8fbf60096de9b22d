"""The ingest's heavy imports run without garbage collection and leave what they imported frozen."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from tracelake.startup import heavy_imports


def test_collection_is_off_while_importing_and_the_imports_are_frozen_after() -> None:
    # A fresh interpreter, so that the imports happen inside the block rather than being found in sys.modules.
    probe = """
import gc
from tracelake.startup import heavy_imports
before = gc.get_freeze_count()
with heavy_imports():
    during = gc.isenabled()
    import dagster_project.assets.marts
print(during, gc.isenabled(), gc.get_freeze_count() - before)
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    during, after, frozen = done.stdout.split()
    assert (during, after) == ("False", "True")
    assert int(frozen) > 100_000  # Dagster's and our modules' objects, skipped by the run's full collections


def test_a_failing_import_turns_collection_back_on_and_freezes_nothing() -> None:
    before = gc.get_freeze_count()
    with pytest.raises(ModuleNotFoundError), heavy_imports():
        import tracelake_no_such_module  # noqa: F401
    assert gc.isenabled()
    assert gc.get_freeze_count() == before
