"""One line instead of a traceback, and a word while waiting: a lake with no run yet, and catalog locks held by a
hung process (a damaged catalog and a moved lake: tests/cli/test_lost_catalog.py, tests/cli/test_moved_lake.py).

A writer that waits for another's turn at a file catalog, or a reader of a catalog still in SQLite's rollback
journal that waits for a writer, used to wait silently (or fail after SQLite's 5 s busy wait): now after a couple of
seconds it says what it waits for and which process holds it, then keeps waiting. Real processes hold the locks.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from pipelines.lake.lake import Lake
from tests.cli.conftest import REPO, RUN

# A hung process holding a catalog's locks for HOLD seconds: a writer's turn (the lock file beside the catalog) and
# SQLite's own lock ("writer": the write lock a commit holds; "exclusive": a rollback journal's commit, which
# readers wait for). It writes READY once it holds them.
HOLDER = """
import fcntl, sqlite3, sys, time
from pathlib import Path
catalog, kind, hold, ready = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), Path(sys.argv[4])
turn = open(catalog.with_name(f".{catalog.name}.lock"), "a")
if kind == "writer":
    fcntl.flock(turn, fcntl.LOCK_EX)
con = sqlite3.connect(catalog, isolation_level=None)
con.execute("begin immediate" if kind == "writer" else "begin exclusive")
con.execute("update ducklake_metadata set value = value where key = 'version'")
ready.touch()
time.sleep(hold)
con.execute("commit")
"""


def _hold(lake: Path, kind: str, seconds: float) -> subprocess.Popen[bytes]:
    ready = lake.parent / "ready"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lake / "catalog.sqlite"), kind, str(seconds),
                               str(ready)])
    while not ready.exists():
        assert holder.poll() is None, "the holder process died"
        time.sleep(0.05)
    return holder


def test_runs_on_a_lake_with_no_run_yet_is_one_line(cli, tmp_path: Path) -> None:
    """What a first ingest killed before its commit leaves: a catalog with its schemas and no table."""
    lake = tmp_path / "lake"
    Lake(str(lake)).connect().close()
    done = cli("runs", "--lake", str(lake))
    assert done.code == 2
    assert done.stderr.strip() == (f"tracelake runs: the lake {lake} holds no run yet: no ingest has committed to "
                                   f"it. Run tracelake ingest SOURCE --lake {lake}")


def test_a_writer_waits_for_a_hung_writers_turn_and_says_whose_it_is(lake: Path, source: Path) -> None:
    ingest = subprocess.Popen(
        [sys.executable, "-m", "tracelake.cli", "ingest", str(source), "--lake", str(lake), "--no-record"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    for line in ingest.stdout:  # the commit comes next: a process takes the catalog's locks and hangs
        if ": building " in line and line.rstrip().endswith(" analysis tables"):
            break
    holder = _hold(lake, "writer", 6)
    stdout, stderr = ingest.communicate(timeout=120)
    holder.wait(timeout=30)
    assert ingest.returncode == 0, stdout + stderr
    assert (f"tracelake: waiting for another writer of the catalog (the lock {lake / '.catalog.sqlite.lock'}), "
            f"held by process {holder.pid} ({sys.executable} -c") in stderr


def test_a_reader_waits_for_a_commit_to_a_rollback_journal_catalog(cli, lake: Path) -> None:
    """A catalog not yet converted to WAL (a lake written before, read but not yet written): a reader waits for a
    writer's commit past SQLite's 5 s busy wait, says so, and then reads."""
    with sqlite3.connect(lake / "catalog.sqlite") as con:
        con.execute("pragma journal_mode = delete")
    holder = _hold(lake, "exclusive", 7)
    done = cli("runs", "--lake", str(lake), "--format", "csv")
    holder.wait(timeout=30)
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines()[1].startswith(f"{RUN},")
    assert (f"tracelake: waiting for the catalog sqlite:{lake / 'catalog.sqlite'}, held by process {holder.pid}"
            in done.stderr)
