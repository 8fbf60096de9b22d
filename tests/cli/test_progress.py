"""What `tracelake ingest` prints while it works: a line per trace parsed, and a line before and after each run's
analysis tables, whose models take tens of seconds on GB-sized traces; on a terminal, progress bars for the parse
(bytes read of the file) and the models (built of N) besides, which a pipe never gets."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
from pathlib import Path

from dagster_project.assets.marts import MARTS
from tests.cli.conftest import REPO, tracelake

ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_ingest_reports_each_runs_traces_and_analysis_tables(tmp_path: Path, shared_traces: Path) -> None:
    source = tmp_path / "source"
    for run_id, trace in (("alexnet", "simple_add/alexnet_trace.json.gz"), ("nccl", "nccl_rank0_of_2/rank-0.json.gz")):
        (source / run_id).mkdir(parents=True)
        shutil.copy(shared_traces / trace, source / run_id / "rank-0.json.gz")

    done = tracelake("ingest", str(source), "--lake", str(tmp_path / "lake"))

    assert done.code == 0, done.stdout + done.stderr
    assert not ESCAPE.search(done.stdout) and "━" not in done.stdout  # not a terminal: plain lines only
    lines = done.stdout.splitlines()
    for index, run_id in enumerate(("alexnet", "nccl"), 1):
        at = lines.index(f"[{index}/2] run {run_id}: 1 trace")
        own = [line for line in lines[at + 1:] if line.startswith(f"  {run_id}")][:4]  # problems' lines between
        parsed, building, built, committed = own
        assert re.fullmatch(rf"  {run_id} rank \d+ rank-0: [\d,]+ events in \d+\.\d s", parsed), done.stdout
        assert building == f"  {run_id}: building {len(MARTS)} analysis tables"
        assert re.fullmatch(rf"  {run_id}: {len(MARTS)} analysis tables in \d+\.\d s", built), done.stdout
        assert re.fullmatch(rf"  {run_id}: committed as snapshot \d+", committed), done.stdout


def _through_a_terminal(args: list[str], columns: int = 120) -> tuple[int, str]:
    """``tracelake ARGS`` with a pseudo-terminal of ``columns`` as its stdout and stderr: its exit code and
    everything it drew there."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("COLUMNS", None)
    process = subprocess.Popen([sys.executable, "-m", "tracelake.cli", *args], stdin=follower, stdout=follower,
                               stderr=follower, cwd=REPO, env=env, close_fds=True)
    os.close(follower)
    drawn = bytearray()
    while True:
        try:
            block = os.read(leader, 1 << 16)
        except OSError:  # EIO: the terminal's other end closed with the process
            break
        if not block:
            break
        drawn += block
    os.close(leader)
    return process.wait(timeout=600), drawn.decode(errors="replace")


def test_a_terminal_sees_the_bars_move(tmp_path: Path, shared_traces: Path) -> None:
    source = tmp_path / "source" / "mtia"
    source.mkdir(parents=True)
    trace = next((shared_traces / "mtia_single_rank").glob("*.json.gz"))  # 2.8 MiB gzip, 456k events
    shutil.copy(trace, source / trace.name)

    code, drawn = _through_a_terminal(["ingest", str(source.parent), "--lake", str(tmp_path / "lake"), "--no-record"])

    assert code == 0, drawn
    text = ESCAPE.sub("", drawn)
    read = [int(p) for p in re.findall(rf"parse {re.escape(trace.name)} .*? (\d+)% [\d.]+/2\.8 MiB", text)]
    assert len(set(read)) >= 3 and read == sorted(read) and read[-1] == 100, read  # it moved, forward, to the end
    built = [tuple(map(int, m)) for m in re.findall(r"build SQL models .*? \d+%\s+(\d+)/(\d+)", text)]
    assert len({done for done, _ in built}) >= 3 and built[-1][0] == built[-1][1] >= len(MARTS), built
    # The lines a pipe gets are there too, above the bars.
    assert re.search(r"  mtia rank 0 mtia_rank_0: [\d,]+ events in \d+\.\d s", text)
    assert "ingested 1 run into" in text
