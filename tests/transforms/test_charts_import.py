"""Importing the charts module does not compile rfc3987_syntax's grammar (2.7 s), and leaves the module importable."""

import subprocess
import sys

import pytest

CHILD = """
import sys
import transforms.charts
print("rfc3987_syntax" in sys.modules)
import rfc3987_syntax
print(rfc3987_syntax.__name__)
"""


def test_altair_imports_without_the_iri_grammar() -> None:
    pytest.importorskip("rfc3987_syntax", reason="installed with jupyterlab (the reference tools' extra)")
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "rfc3987_syntax"]


def test_the_ingest_imports_altair_only_when_it_renders_a_report() -> None:
    # altair and its schemas (~45 MB) stay out of the memory an ingest holds through its models.
    probe = "import sys, tracelake.ingest; print('altair' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]
