"""Fixtures of the lake tests."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sqlite", "postgres"])
def catalog(request: pytest.FixtureRequest) -> str | None:
    """The lake's catalog: the default SQLite file inside the lake, or a fresh database on the session's loopback
    PostgreSQL."""
    return request.getfixturevalue("postgres_database") if request.param == "postgres" else None
