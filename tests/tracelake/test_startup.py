"""The ingest's heavy imports run without garbage collection and leave what they imported frozen; the command
line's processes leave pandas out."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import EXAMPLE_TRACES
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


def test_the_console_script_ingests_without_importing_pandas(tmp_path: Path) -> None:
    # -X importtime lists every module the process imports; pandas is installed here (the reference tools need it).
    command = [sys.executable, "-X", "importtime", "-c", "from tracelake.cli import entry; entry()",
               "ingest", str(EXAMPLE_TRACES), "--lake", str(tmp_path / "lake")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    imported = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert {"dagster", "duckdb", "pyarrow"} <= imported
    # DuckDB tries ``import pandas`` before each binding (listed, and refused); a real import brings its submodules.
    assert not {name for name in imported if name.startswith("pandas.")}


def test_a_worker_binds_duckdb_parameters_without_pandas_and_pandas_raises_as_if_not_installed() -> None:
    probe = """
import sys
import duckdb
from tracelake.startup import start_worker
start_worker()
print(duckdb.connect().execute("select $x + 1", {"x": 1}).fetchone()[0], "pandas" in sys.modules)
try:
    import pandas
except ModuleNotFoundError as exc:
    print(exc.name)
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["2", "False", "pandas"]


def test_pandas_stays_where_it_was_imported_before() -> None:
    probe = """
import pandas
from tracelake.startup import leave_out_pandas
leave_out_pandas()
import pandas.api.types
print(pandas.api.types.is_integer(1))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["True"]
