"""DuckDB checks the signature of every extension file the first time it is loaded; tracelake's own later
connections, of that process and of later ones while the file is the one checked, reuse that check, a connection
handed to users never does; an installed file that is damaged or fails its check is replaced by the wheel's, never
loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NAMES = ("ducklake", "sqlite")
# Connections of one process: per connection, whether it skipped DuckDB's signature check, whether it would install
# or load more of itself, and the extensions it loaded.
CONNECT = """
import json, sys
from pipelines.lake.extensions import extension_connection
config = {"extension_directory": sys.argv[1]}
out = []
for for_users in json.loads(sys.argv[2]):
    con = extension_connection(tuple(sys.argv[3:]), config, for_users=for_users)
    settings = dict(con.execute("select name, value from duckdb_settings() where name in "
                                "('allow_unsigned_extensions', 'autoinstall_known_extensions')").fetchall())
    loaded = sorted(r[0] for r in con.execute("select extension_name from duckdb_extensions() where loaded").fetchall())
    out.append({"unchecked": settings["allow_unsigned_extensions"] == "true",
                "autoinstall": settings["autoinstall_known_extensions"] == "true", "loaded": loaded})
print(json.dumps(out))
"""


def _connect(directory: Path, for_users: list[bool]) -> list[dict[str, object]]:
    """What the connections of a new process to ``directory``'s extensions did (raises CalledProcessError if one
    failed)."""
    done = subprocess.run([sys.executable, "-c", CONNECT, str(directory), json.dumps(for_users), *NAMES],
                          cwd=REPO, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _installed(directory: Path, name: str) -> Path:
    (path,) = directory.rglob(f"{name}.duckdb_extension")
    return path


@pytest.fixture
def extension_directory(tmp_path: Path) -> Path:
    """A folder of the test's own, which the first connection installs the wheels' extensions into."""
    directory = tmp_path / "extensions"
    (first,) = _connect(directory, [False])
    assert first["unchecked"] is False and {"ducklake", "sqlite_scanner"} <= set(first["loaded"])
    return directory


def test_a_checked_file_is_not_checked_again_and_users_connections_always_are(extension_directory: Path) -> None:
    internal, again, user = _connect(extension_directory, [False, False, True])
    assert internal["unchecked"] is True  # a new process reuses the fixture's process's check of the same files
    assert again["unchecked"] is True
    assert user["unchecked"] is False and user["autoinstall"] is False  # a notebook's connection checks, installs nothing
    assert all({"ducklake", "sqlite_scanner"} <= set(c["loaded"]) for c in (internal, again, user))


def test_a_file_changed_since_its_check_is_checked_again(extension_directory: Path) -> None:
    path = _installed(extension_directory, "ducklake")
    path.write_bytes(path.read_bytes())  # the same bytes, a new file: its record no longer vouches for it
    (internal,) = _connect(extension_directory, [False])
    assert internal["unchecked"] is False
    (later,) = _connect(extension_directory, [False])
    assert later["unchecked"] is True


@pytest.mark.parametrize("damage", ["flipped byte", "truncated"])
def test_a_damaged_installed_extension_is_replaced_by_the_wheels(extension_directory: Path, damage: str) -> None:
    path = _installed(extension_directory, "ducklake")
    genuine = path.read_bytes()
    damaged = bytearray(genuine)
    if damage == "truncated":
        del damaged[len(damaged) // 2:]
    else:
        damaged[len(damaged) // 2] ^= 0xFF
    path.write_bytes(bytes(damaged))
    (connection,) = _connect(extension_directory, [True])
    assert connection["unchecked"] is False and "ducklake" in connection["loaded"]
    assert path.read_bytes() == genuine


def test_an_account_without_a_home_loads_them_from_the_temporary_folder(tmp_path: Path) -> None:
    code = ("from pipelines.lake.extensions import extension_connection; "
            "con = extension_connection(('ducklake', 'sqlite'), {}); "
            "print(con.execute(\"select install_path from duckdb_extensions() where extension_name = 'ducklake'\")"
            ".fetchone()[0])")
    env = {**os.environ, "HOME": str(tmp_path / "no-such-home"), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip().startswith(str(tmp_path / "tmp" / "tracelake-duckdb-extensions-"))
