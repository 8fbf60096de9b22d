"""``tracelake tables`` shows where a table departs from its anchor on purpose: each table's own lines under its
description, and every table's in the summary, from the one list the marts' headers hold."""

from __future__ import annotations

import pytest

from tracelake.browse import show_tables
from transforms.docs import DIFFERENCES_TITLE, differences


def test_a_tables_deliberate_differences_are_shown_with_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert show_tables("idle_time") == 0
    shown = capsys.readouterr().out
    (text,) = [text for name, text in differences() if name == "idle_time"]
    assert f"differs on purpose: {text}" in shown


def test_the_summary_lists_every_deliberate_difference(capsys: pytest.CaptureFixture[str]) -> None:
    assert show_tables(None) == 0
    shown = capsys.readouterr().out
    assert DIFFERENCES_TITLE in shown
    assert all(f"  {name}: {text}" in shown for name, text in differences())
