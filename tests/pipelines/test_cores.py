"""The cores a parse and the marts share out are those the process may run on, not the machine's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from pipelines.cores import available_cores

PROBE = """
from pipelines.cores import available_cores
from dagster_project.resources import IngestSettingsResource
settings = IngestSettingsResource(parallelism=1)
print(available_cores(), settings.parse_settings().threads, settings.build().threads)
"""


def test_at_least_one_and_no_more_than_the_machine_has() -> None:
    assert 1 <= available_cores() <= (os.cpu_count() or 1)


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs util-linux's taskset")
def test_a_process_pinned_to_one_cpu_parses_and_builds_on_one_thread() -> None:
    done = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", PROBE], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["1", "1", "1"]
