"""A run's analysis tables built within a low memory limit equal those built within a large one: the models that call
Python functions are built in several batches of their pieces instead of one, and nothing is built twice."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from bench.make_trace import DEFAULT_SOURCE, write_trace
from pipelines.lake.lake import Lake
from pipelines.memory import MemoryShares
from pipelines.rows import sql_path
from pipelines.sources import discover_runs
from pipelines.staging.area import new_version
from transforms.composition.ingest import stage_traces
from transforms.composition.steps import BuildSettings, build_tables, stage_run
from transforms.runner import FunctionMemory, function_rows

pytestmark = pytest.mark.skipif(not DEFAULT_SOURCE.exists(), reason="shared traces not found")

LOW, HIGH = "600MB", "8GB"
TRACE_BYTES = 200_000_000  # ~850k events, ~290k CPU ops: batches within LOW, one within HIGH


def _normal(rows: list[tuple]) -> list[tuple]:
    """Floats to 9 significant digits: DuckDB's parallel sums add in any order, whatever the memory."""
    return [tuple(float(f"{v:.9g}") if isinstance(v, float) else v for v in row) for row in rows]


def _rows_per_call(limit: str) -> int:
    """The most rows a call of the Python functions may hold within ``limit``, whichever function."""
    return max(function_rows(FunctionMemory(MemoryShares(limit).function_bytes)).values())


@pytest.mark.slow
def test_tables_built_within_a_low_memory_limit_equal_those_within_a_large_one(tmp_path: Path) -> None:
    run_folder = tmp_path / "source" / "big"
    run_folder.mkdir(parents=True)
    with open(run_folder / "rank-0.json", "wb") as out:
        write_trace(DEFAULT_SOURCE, out, TRACE_BYTES)
    (run,) = discover_runs(str(tmp_path / "source"))
    lake = Lake(str(tmp_path / "lake"))
    version = new_version()
    staged = stage_run(run, lake, version, stage_traces(run, lake, version))

    tables: dict[str, dict[str, list[tuple]]] = {}
    with duckdb.connect() as con:
        cpu_ops = staged.row_counts["cpu_ops"]
        assert _rows_per_call(LOW) < cpu_ops < _rows_per_call(HIGH)  # batches within LOW, one within HIGH
        for limit in (LOW, HIGH):
            built = build_tables(lake, staged, settings=BuildSettings(memory_limit=limit, threads=2))
            assert built.failure is None, built.failure
            tables[limit] = {
                name: _normal(con.execute(f"select * from read_parquet({sql_path(path)}) order by all").fetchall())
                for name, (path,) in built.files.items() if name.startswith("marts.")
            }
    assert sorted(tables[LOW]) == sorted(tables[HIGH])
    assert sum(1 for rows in tables[HIGH].values() if rows) >= 20
    for name, rows in tables[HIGH].items():
        assert tables[LOW][name] == rows, name
