"""The README documents what the code has: every environment variable tracelake reads, every analysis table."""

from __future__ import annotations

from pipelines.settings import VARIABLES
from pipelines.tables import RAW_TABLES
from tests.support.servers import ROOT
from transforms.docs import all_docs

README = (ROOT / "README.md").read_text()


def test_every_setting_is_in_the_readme() -> None:
    assert [v.name for v in VARIABLES if f"`{v.name}`" not in README] == []


def test_every_table_is_in_the_readme() -> None:
    assert [name for name in (*all_docs(), *RAW_TABLES) if f"`{name}`" not in README] == []
