"""Local scratch folders under ``$TMPDIR``, named after the process that owns them so leftovers can be swept.

A killed ingest (``kill -9``, an OOM kill, a pod evicted) cannot clean up its parse and spill folders, which
may hold hundreds of MB; the next ingest on the machine removes those whose process is gone.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PREFIX = "tracelake-"
_OWNED = re.compile(rf"^{PREFIX}(\d+)-")


@contextmanager
def scratch_dir(purpose: str) -> Iterator[Path]:
    """A fresh folder for ``purpose``, removed on exit; its name carries this process's id."""
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}{os.getpid()}-{purpose}-") as path:
        yield Path(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def sweep_dead_scratch(root: str | None = None) -> list[Path]:
    """Remove the scratch folders of processes that no longer run; returns what was removed."""
    folder = Path(root or tempfile.gettempdir())
    removed = []
    for entry in folder.glob(f"{PREFIX}*"):
        owner = _OWNED.match(entry.name)
        if owner and entry.is_dir() and not _alive(int(owner.group(1))):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed
