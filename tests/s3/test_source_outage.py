"""A source store that stops answering during the parse of a run that already has a version (SeaweedFS on
loopback, killed or frozen with SIGSTOP): the run's ingest fails with one line naming the file and the cause, the
exit code is non-zero, no traceback, and the previous version stays whole.

Unreadable traces used to be taken for bad files (``parse_failed``): the run was committed without them, its
complete version gone (3 of 3 cases), with 8 to 12 tracebacks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.lake.read import open_lake
from tests.s3.conftest import REPO, running_seaweedfs, subprocess_env

TRACES = ["simple_add/alexnet_trace.json.gz", "simple_add/benchmark_result_493459_1694039959_trace.json.gz",
          "rocm_mi250/mi250_minitoy_train_ROCm6_2_kineto.json.gz", "nccl_rank0_of_2/rank-0.json.gz"]


def _counts(lake: Path) -> dict[str, int]:
    with open_lake(str(lake)) as con:
        tables = [row[0] for row in con.execute("select table_name from duckdb_tables() where database_name = 'lake' "
                                                "and schema_name in ('raw', 'marts')").fetchall()]
        return {t: con.execute(f"select count(*) from {t} where random() >= 0").fetchone()[0] for t in tables}


@pytest.mark.slow
@pytest.mark.parametrize("fault", [signal.SIGSTOP, signal.SIGKILL], ids=["frozen", "killed"])
def test_a_source_outage_fails_the_run_and_keeps_its_version(fault: signal.Signals, tmp_path: Path, cli,
                                                             make_source) -> None:
    with running_seaweedfs(tmp_path / "weed") as (server, weed):
        env = server.env(TRACELAKE_HTTP_TIMEOUT_S="2")
        server.make_bucket("traces")
        server.upload_folder("traces", "incoming", make_source({"job": TRACES}))
        lake = tmp_path / "lake"
        args = ["ingest", "s3://traces/incoming", "--lake", str(lake), "--no-record"]
        first = cli(*args, env=env)
        assert first.returncode == 0, first.output
        before = _counts(lake)
        assert before["kernels"] > 0

        again = subprocess.Popen([sys.executable, "-m", "tracelake.cli", *args], cwd=REPO, env=subprocess_env(env),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not list((lake / "_staging").glob("*/*/.lease")):  # the ingest holds its lease: the parse starts
            assert again.poll() is None, again.communicate()
            assert time.monotonic() < deadline, "the second ingest never started staging"
            time.sleep(0.002)
        os.killpg(weed.pid, fault)
        try:
            stdout, stderr = again.communicate(timeout=400)
        finally:
            if fault == signal.SIGSTOP:
                os.killpg(weed.pid, signal.SIGCONT)
    output = stdout + stderr
    assert again.returncode != 0, output
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if "ERROR" in line]
    assert len(errors) == 1, output
    assert "SourceUnavailable" in errors[0] and "s3://traces/incoming/job/" in errors[0], errors[0]
    assert "ingested 0 of 1 run" in stdout, stdout
    assert _counts(lake) == before
