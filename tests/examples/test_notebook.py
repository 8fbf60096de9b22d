"""The example notebook: saved with its outputs (so it reads on a code host), and it runs end to end against a lake
built from the example traces."""

from __future__ import annotations

import os

import nbformat
import pytest
from nbclient import NotebookClient

from tests.support.servers import ROOT

NOTEBOOK = ROOT / "examples" / "notebooks" / "tour.ipynb"


def _outputs(notebook: nbformat.NotebookNode) -> list[dict]:
    return [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]


def test_tour_notebook_is_saved_with_its_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(cell.outputs for cell in code), "a code cell was saved without its output"
    assert not [o for o in _outputs(notebook) if o.output_type == "error"]
    assert any("image/svg+xml" in o.get("data", {}) for o in _outputs(notebook))


@pytest.mark.slow
def test_tour_notebook_runs_and_draws_its_charts(example_lake, monkeypatch, tmp_path):
    monkeypatch.setenv("TRACELAKE_LAKE", str(example_lake))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()

    outputs = _outputs(notebook)
    assert not [o for o in outputs if o.output_type == "error"]
    svgs = [o["data"]["image/svg+xml"] for o in outputs if "image/svg+xml" in o.get("data", {})]
    titles = [o["data"]["text/markdown"] for o in outputs if "text/markdown" in o.get("data", {})]
    assert titles.count("**cpu_mlp**") == 2  # its memory curve and its step chart, each on its own scale
    assert any("<path" in svg and "rank 0 CPU" in svg and "allocated (" in svg for svg in svgs)
    assert sum("mean time per step (" in svg for svg in svgs) >= 4  # one step chart per run
    tables = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any("nccl_rank0_of_2" in html and "NVIDIA A100" in html for html in tables)
    assert any("GPU0" in html and "GPU utilization (%)" in html for html in tables)
