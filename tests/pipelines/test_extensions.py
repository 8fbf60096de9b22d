"""An extension DuckDB has checked is loaded without checking again, in later processes too, while its file is the
one checked; a file changed since is checked again, and one that fails the check is never loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.lake.extensions import VERIFIED_SUFFIX

REPO = Path(__file__).resolve().parents[2]
NAMES = ("ducklake", "sqlite")
# One process's connection: whether it skipped DuckDB's signature check, and the extensions it loaded.
CONNECT = """
import json, sys
from pipelines.lake.extensions import extension_connection
con = extension_connection(tuple(sys.argv[2:]), {"extension_directory": sys.argv[1]})
(unsigned,) = con.execute("select current_setting('allow_unsigned_extensions')").fetchone()
loaded = sorted(row[0] for row in con.execute("select extension_name from duckdb_extensions() where loaded").fetchall())
print(json.dumps({"unchecked": unsigned, "loaded": loaded}))
"""


def _connect(directory: Path) -> dict[str, object]:
    """What a new process's connection to ``directory``'s extensions did (raises CalledProcessError if it failed)."""
    done = subprocess.run(
        [sys.executable, "-c", CONNECT, str(directory), *NAMES], cwd=REPO, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def _installed(directory: Path, name: str) -> Path:
    (path,) = directory.rglob(f"{name}.duckdb_extension")
    return path


@pytest.fixture
def extension_directory(tmp_path: Path) -> Path:
    """A folder of the process's own, which the first connection installs the wheels' extensions into."""
    directory = tmp_path / "extensions"
    first = _connect(directory)
    assert first["unchecked"] is False
    assert {"ducklake", "sqlite_scanner"} <= set(first["loaded"])
    return directory


def test_a_checked_extension_loads_unchecked_in_a_later_process(extension_directory: Path) -> None:
    markers = sorted(p.name for p in extension_directory.rglob(f"*{VERIFIED_SUFFIX}"))
    assert markers == [f"ducklake.duckdb_extension{VERIFIED_SUFFIX}", f"sqlite_scanner.duckdb_extension{VERIFIED_SUFFIX}"]
    later = _connect(extension_directory)
    assert later["unchecked"] is True
    assert {"ducklake", "sqlite_scanner"} <= set(later["loaded"])


def test_a_file_written_since_its_check_is_checked_again(extension_directory: Path) -> None:
    path = _installed(extension_directory, "ducklake")
    path.write_bytes(path.read_bytes())  # the same bytes, but written since the check
    again = _connect(extension_directory)
    assert again["unchecked"] is False
    assert _connect(extension_directory)["unchecked"] is True  # checked, and recorded, once more


def test_a_file_changed_since_its_check_is_never_loaded(extension_directory: Path) -> None:
    path = _installed(extension_directory, "ducklake")
    tampered = bytearray(path.read_bytes())
    tampered[len(tampered) // 2] ^= 0xFF
    path.write_bytes(bytes(tampered))
    with pytest.raises(subprocess.CalledProcessError) as refused:
        _connect(extension_directory)
    assert f'Extension "{path}" could not be loaded because its signature is either missing or invalid' in (
        refused.value.stderr
    )
