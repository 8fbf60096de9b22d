"""Fixtures of the fleet tests: tracelake installed from its wheel with the `fleet` extra, and SeaweedFS."""

from __future__ import annotations

import pytest

from tests.s3.conftest import seaweedfs_s3  # noqa: F401  (the same real S3 server as the object-storage tests)
from tests.support.installed import InstalledVenv, dockerfile_extras, install_wheel


@pytest.fixture(scope="session")
def fleet_install(tmp_path_factory: pytest.TempPathFactory) -> InstalledVenv:
    """tracelake[fleet] installed from its wheel into a fresh venv, as deploy/Dockerfile installs it."""
    return install_wheel(tmp_path_factory.mktemp("fleet_install"), extras=dockerfile_extras())
