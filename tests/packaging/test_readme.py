"""The README documents what the code has: every environment variable tracelake reads, every table, every deliberate
difference from the reference tools; and the table reference is the one generated from the models' headers."""

from __future__ import annotations

from pipelines.settings import VARIABLES
from pipelines.tables import RAW_TABLES
from tests.support.servers import ROOT
from transforms.docs import all_docs, differences, reference_markdown

README = (ROOT / "README.md").read_text()


def test_every_setting_is_in_the_readme() -> None:
    assert [v.name for v in VARIABLES if f"`{v.name}`" not in README] == []


def test_every_table_is_in_the_readme() -> None:
    assert [name for name in (*all_docs(), *RAW_TABLES) if f"`{name}`" not in README] == []


def test_every_deliberate_difference_is_in_the_readme() -> None:
    found = differences()
    assert found, "the marts' headers list their deliberate differences (-- differs: lines)"
    assert [text for _, text in found if text not in README] == []


def test_the_table_reference_is_generated_from_the_headers() -> None:
    reference = (ROOT / "sql" / "TABLES.md").read_text()
    assert reference == reference_markdown(), "regenerate it: python -m transforms.docs > sql/TABLES.md"


def test_the_readme_reads_in_five_minutes() -> None:
    assert len(README.encode()) < 20_000
