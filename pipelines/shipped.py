"""Folders the repository keeps at its top level (``sql/``, ``examples/traces/``) and the wheel ships inside a
package (pyproject.toml maps them to ``transforms/sql/`` and ``tracelake/sample_traces/``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def shipped_folder(package: str, installed: str, checkout: str, *, must_hold: str) -> Path:
    """The folder ``installed`` inside the installed ``package``, else ``checkout`` (relative to the repository
    root) beside a package run from a checkout. Raises FileNotFoundError when neither holds ``must_hold``."""
    package_dir = Path(str(resources.files(package)))  # a real folder: wheels are installed unzipped
    candidates = (package_dir / installed, package_dir.parent / checkout)
    for folder in candidates:
        if (folder / must_hold).exists():
            return folder
    raise FileNotFoundError(
        f"none of {', '.join(map(str, candidates))} holds {must_hold}: "
        f"the package {package!r} was installed without its data files"
    )
