"""Mistyped names get the closest known ones ("did you mean"), and a missing SOURCE one clear line."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import RUN, tracelake


def test_a_mistyped_table_gets_the_closest_names() -> None:
    done = tracelake("tables", "kernal_stats")
    assert done.code == 2
    assert done.stderr.strip().startswith("tracelake tables: no table 'kernal_stats'; did you mean 'kernel_stats'")
    assert "op_stats, " not in done.stderr  # the close names, not the whole list


def test_a_mistyped_table_of_files_gets_the_closest_names(lake: Path) -> None:
    done = tracelake("files", "kernal_stats", "--lake", str(lake))
    assert done.code == 2 and "did you mean 'kernel_stats'" in done.stderr


def test_a_mistyped_run_gets_the_closest_runs(lake: Path) -> None:
    check = tracelake("check", RUN + "b", "--lake", str(lake))
    assert check.code == 2 and check.stderr.strip().endswith(f"did you mean {RUN!r}?"), check.stderr
    compare = tracelake("compare", RUN, "jb", "--lake", str(lake))
    assert compare.code == 2 and f"did you mean {RUN!r}?" in compare.stderr, compare.stderr
    far = tracelake("check", "something_else_entirely", "--lake", str(lake))
    assert far.code == 2 and "did you mean" not in far.stderr


def test_a_missing_source_is_one_line(tmp_path: Path) -> None:
    done = tracelake("ingest", str(tmp_path / "no_such_folder"), "--lake", str(tmp_path / "lake"))
    assert done.code == 2 and done.stdout == ""
    assert done.stderr.strip() == (f"tracelake ingest: source {tmp_path / 'no_such_folder'} does not exist: give a "
                                   "folder or URL holding trace files (*.json, *.json.gz)")
