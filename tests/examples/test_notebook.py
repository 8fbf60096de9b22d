"""The example notebook runs end to end against a lake built from the example traces."""

from __future__ import annotations

import os

import nbformat
import pytest
from nbclient import NotebookClient

from tests.support.servers import ROOT

pytestmark = pytest.mark.slow


def test_tour_notebook_runs_and_draws_its_charts(example_lake, monkeypatch, tmp_path):
    monkeypatch.setenv("TRACELAKE_LAKE", str(example_lake))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    notebook = nbformat.read(ROOT / "examples" / "notebooks" / "tour.ipynb", as_version=4)
    NotebookClient(notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()

    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    svgs = [o["data"]["image/svg+xml"] for o in outputs if "image/svg+xml" in o.get("data", {})]
    assert len(svgs) >= 2  # the memory timeline and the step chart, plus overlap bars once that mart exists
    assert any("<path" in svg and "cpu_mlp rank 0" in svg for svg in svgs)
    tables = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any("nccl_rank0_of_2" in html and "NVIDIA A100" in html for html in tables)
