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
