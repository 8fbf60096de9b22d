"""Every file named like a trace that ``tracelake ingest`` does not read is named in one line, with why: hidden
names and folders, a FIFO, links to a device, to a folder and to nothing (issue 40: some were skipped silently,
links were named twice)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.cli.conftest import tracelake
from tests.support.servers import EXAMPLE_TRACES

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and symbolic links are POSIX")

SKIPPED = {  # path under the run folder → what the line says about it
    "rank-1.json": "a FIFO, not a regular file",
    ".rank-2.json.gz": "its name starts with '.'",
    "_rank-3.json.gz": "its name starts with '_'",
    ".ipynb_checkpoints/rank-4.json.gz": "in the folder '.ipynb_checkpoints'",
    "rank-5.json": "a symbolic link to /dev/null, which is not a file",
    "rank-6.json": "a symbolic link to {missing}, which is not a file",
    "rank-7.json": "a symbolic link to {folder}, which is not a file",
}


def test_every_skipped_file_is_named_once_and_the_traces_beside_them_land(tmp_path: Path) -> None:
    run = tmp_path / "source" / "run"
    (run / ".ipynb_checkpoints").mkdir(parents=True)
    trace = EXAMPLE_TRACES / "simple_add" / "alexnet_trace.json.gz"
    shutil.copy(trace, run / "rank-0.json.gz")
    os.mkfifo(run / "rank-1.json")  # opened, it would block the ingest until a writer came
    for name in (".rank-2.json.gz", "_rank-3.json.gz", ".ipynb_checkpoints/rank-4.json.gz"):
        shutil.copy(trace, run / name)
    (run / "rank-5.json").symlink_to("/dev/null")
    (run / "rank-6.json").symlink_to(tmp_path / "missing")
    (run / "rank-7.json").symlink_to(tmp_path)
    (run / "notes.txt").write_text("not named like a trace: not a skipped trace either")

    done = tracelake("ingest", str(tmp_path / "source"), "--lake", str(tmp_path / "lake"))

    assert done.code == 0, done.stdout + done.stderr
    assert "found 1 trace file in 1 run" in done.stdout and ": ok" in done.stdout
    lines = (done.stdout + done.stderr).splitlines()
    for name, why in SKIPPED.items():
        naming = [line for line in lines if f"{run / name}:" in line]
        assert len(naming) == 1, (name, naming)
        assert "skipped" in naming[0] and why.format(missing=tmp_path / "missing", folder=tmp_path) in naming[0]
    assert not [line for line in lines if "notes.txt" in line]


def test_a_fifo_given_as_the_source_is_named(tmp_path: Path) -> None:
    fifo = tmp_path / "rank-0.json"
    os.mkfifo(fifo)
    done = tracelake("ingest", str(fifo), "--lake", str(tmp_path / "lake"))
    assert done.code == 1
    assert f"skipped {fifo}: a FIFO, not a regular file" in done.stderr
    assert "no trace files" in done.stdout
