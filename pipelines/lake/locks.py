"""Who holds a lock on a lake's catalog, and a line saying so while a command waits for it.

A local catalog is guarded by two kinds of lock: the ``flock`` writers take turns with
(:meth:`pipelines.lake.lake.Lake.writer_turn`), and SQLite's own byte-range locks (on the catalog in a rollback
journal, on its ``-shm`` file in WAL mode). A process that hangs holding one makes the others wait; Linux lists
every such lock with its owner in ``/proc/locks``, which names the process here. Elsewhere nobody is named.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

NOTICE_AFTER_S = 2.0
"""A wait longer than this is said, with the lock's holder, on stderr; then the command keeps waiting."""

_PROC_LOCKS = Path("/proc/locks")


def _write_lockers(inodes: set[int]) -> set[int]:
    """Processes other than this one that hold (not wait for) a write lock on a file of ``inodes``."""
    try:
        lines = _PROC_LOCKS.read_text().splitlines()
    except OSError:
        return set()
    holders = set()
    for line in lines:
        fields = line.split()
        # "1: POSIX  ADVISORY  WRITE 1234 08:01:5678 120 120"; a waiting request has "->" after the number
        if len(fields) < 6 or fields[1] == "->" or fields[3] != "WRITE":
            continue
        pid, file_id = fields[4], fields[5]
        if pid.isdigit() and int(pid) != os.getpid() and int(file_id.rsplit(":", 1)[-1]) in inodes:
            holders.add(int(pid))
    return holders


def _command(pid: int) -> str:
    """Process ``pid`` for people: its command line, shortened (a worker process by its parent's), or "process N"."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"process {pid}"
    text = " ".join(" ".join(word.decode(errors="replace").split()) for word in words if word)
    if "multiprocessing" in text:  # a pool's worker: its command line is the pool's machinery, its parent's says
        try:
            parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return f"process {pid}"
        return f"process {pid}, a worker of {_command(parent)}"
    return f"process {pid} ({text if len(text) <= 100 else text[:97] + '...'})"


def lock_holders(paths: Iterable[Path]) -> str:
    """Who holds a write lock on any of ``paths``: "process 1234 (python -m tracelake.cli ingest …)", or ""."""
    inodes = set()
    for path in paths:
        try:
            inodes.add(path.stat().st_ino)
        except OSError:
            continue
    return ", ".join(_command(pid) for pid in sorted(_write_lockers(inodes))) if inodes else ""


@contextmanager
def wait_notice(what: str, paths: list[Path], *, always: bool = False) -> Iterator[None]:
    """Say on stderr what the block waits for when it lasts longer than :data:`NOTICE_AFTER_S`: ``what``, held by
    whom (:func:`lock_holders` of ``paths``), once for each holder seen. Without ``always``, only a wait on a lock
    that another process is seen to hold is said (a slow block that holds nothing up stays quiet)."""
    done = threading.Event()

    def watch() -> None:
        said: set[str] = set()
        while not done.wait(NOTICE_AFTER_S):
            holders = lock_holders(paths)
            if (holders or (always and not said)) and holders not in said:
                held = f", held by {holders}" if holders else ""
                print(f"tracelake: waiting for {what}{held}", file=sys.stderr, flush=True)
                said.add(holders)

    watcher = threading.Thread(target=watch, name="lock-wait-notice", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
