"""``tracelake ui`` stops when asked even where ``dagster dev`` does not: after a stop signal its process group gets
``SHUTDOWN_GRACE_S`` to exit, then is killed (dagster dev was seen still up 60 s after a SIGTERM on a loaded machine)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from tracelake.ui import SHUTDOWN_GRACE_S, _wait_for

IGNORES_SIGINT = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('ready', flush=True); time.sleep(600)"


def test_a_process_group_that_ignores_the_stop_is_killed_after_the_grace() -> None:
    process = subprocess.Popen([sys.executable, "-c", IGNORES_SIGINT], start_new_session=True, stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"ready\n"
    process.send_signal(signal.SIGINT)  # ignored, as a hung shutdown would
    started = time.monotonic()

    code = _wait_for(process, [started - SHUTDOWN_GRACE_S])  # the grace has run out

    assert code == -signal.SIGKILL
    assert time.monotonic() - started < 10


def test_a_process_that_exits_gives_its_own_code() -> None:
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], start_new_session=True)
    assert _wait_for(process, []) == 3
