"""Finding no SQL models is an error, and what an ingestion worker imports does not need torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.shipped import shipped_folder
from tests.support.servers import ROOT
from transforms.models import default_sql_root, discover_models

# Every module an ingestion worker (CLI, Dagster code location, Celery step worker) loads.
WORKER_MODULES = ("tracelake.cli", "tracelake.ingest", "tracelake.query", "dagster_project.definitions",
                  "dagster_project.record", "transforms.composition.ingest", "transforms.runner")


def test_a_folder_without_marts_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "intermediate").mkdir()
    (tmp_path / "intermediate" / "int_x.sql").write_text("select 1 as x\n")
    with pytest.raises(FileNotFoundError, match="no SQL models"):
        discover_models(tmp_path)


def test_a_package_without_its_data_is_an_error() -> None:
    with pytest.raises(FileNotFoundError, match="installed without its data files"):
        shipped_folder("transforms", "no_such_folder", "no_such_folder", must_hold="marts")


def test_a_checkout_reads_its_own_sql_folder() -> None:
    assert default_sql_root() == ROOT / "sql"


def test_worker_modules_import_without_torch() -> None:
    # sys.modules[name] = None makes any import of torch raise ImportError.
    code = "import sys; sys.modules['torch'] = None\n" + "".join(f"import {m}\n" for m in WORKER_MODULES)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
