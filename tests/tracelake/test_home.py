"""The local Dagster home's SQLite files commit without fsync; other SQLite files keep SQLite's default."""

from pathlib import Path

from sqlalchemy import create_engine, text

from tracelake.home import skip_history_fsync

FULL, OFF = 2, 0  # PRAGMA synchronous values


def _synchronous(path: Path) -> int:
    engine = create_engine(f"sqlite:///{path}")
    with engine.connect() as connection:
        return connection.execute(text("pragma synchronous")).scalar_one()


def test_only_the_home_skips_fsync(tmp_path: Path) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    assert _synchronous(home / "runs.db") == FULL
    skip_history_fsync(home)
    assert _synchronous(home / "runs.db") == OFF
    assert _synchronous(home / "storage.db") == OFF
    assert _synchronous(elsewhere / "catalog.db") == FULL
