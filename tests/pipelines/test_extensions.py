"""Extensions checked ahead (``check_ahead``): the process's later connections load them without checking again, and
a check that fails says nothing, leaving the error to the connection that needs the extension."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK_AHEAD = """
import threading
from pipelines.extensions import check_ahead, extension_connection
check_ahead({names!r})
for thread in threading.enumerate():
    if thread.name == "extension-check":
        thread.join()
con = extension_connection({names!r}, {{}})
print(con.execute("select current_setting('allow_unsigned_extensions')").fetchone()[0])
"""


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter: which extensions were checked is state of the process."""
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_connection_after_the_check_ahead_loads_without_checking_again() -> None:
    done = _python(CHECK_AHEAD.format(names=("ducklake", "sqlite")))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"]  # loaded as already checked
    assert done.stderr == ""


def test_a_failed_check_ahead_is_silent_and_the_connection_reports_it() -> None:
    done = _python(CHECK_AHEAD.format(names=("no_such_extension",)))
    assert done.returncode == 1
    assert "Exception in thread" not in done.stderr  # the connection's error alone
    assert "no_such_extension" in done.stderr.splitlines()[-1]
