"""tracelake installed from its wheel into a fresh venv outside the checkout, offline and in seconds.

The venv gets the wheel (built and installed by deploy/install.sh, as the Docker image does) and, as its only
other packages, the distributions the wheel's pinned requirements need, linked from the test environment:
the transitive closure of ``[project] dependencies`` plus the requested extras, nothing more. So a module that
imports an undeclared package (torch, which is only the ``profile`` extra) fails here as it would in production,
the checkout's editable install is invisible, and pip itself (``pip check``) verifies the pins.
"""

from __future__ import annotations

import os
import re
import subprocess
import sysconfig
import tomllib
import venv
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.servers import ROOT

# Tools the install itself runs (pip, and setuptools as the build backend), not dependencies of the package.
BUILD_TOOLS = ("pip", "setuptools")


@dataclass(frozen=True)
class InstalledVenv:
    """A venv holding tracelake as installed from its wheel."""

    root: Path

    def bin(self, name: str) -> str:
        return str(self.root / "bin" / name)

    def env(self, **extra: str) -> dict[str, str]:
        """A clean environment for the venv: its bin first on PATH, no PYTHONPATH (the checkout must not leak in)."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        return {**env, "PATH": f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}", **extra}

    def python(self, code: str, *, cwd: Path, env: dict[str, str] | None = None) -> str:
        """Run ``code`` with the venv's python in ``cwd``; return stdout, fail with stderr."""
        done = subprocess.run([self.bin("python"), "-c", code], cwd=cwd, env=env or self.env(),
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done.stdout


def declared_requirements(extras: tuple[str, ...]) -> list[Requirement]:
    """``[project] dependencies`` plus those of ``extras``, from pyproject.toml (what the wheel's metadata says)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    texts = [*project["dependencies"], *(r for e in extras for r in project["optional-dependencies"][e])]
    return [Requirement(t) for t in texts]


def dependency_closure(requirements: list[Requirement]) -> dict[str, metadata.Distribution]:
    """Every distribution of this test environment that ``requirements`` need, transitively (markers evaluated)."""
    site = sysconfig.get_paths()["purelib"]
    installed = {canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions(path=[site])}
    needed: dict[str, metadata.Distribution] = {}
    todo, seen = list(requirements), set()
    while todo:
        req = todo.pop()
        key = (canonicalize_name(req.name), frozenset(req.extras))
        if key in seen or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(key)
        if key[0] not in installed:
            raise LookupError(f"{req} is declared but not installed in the test environment ({site})")
        dist = needed[key[0]] = installed[key[0]]
        for text in dist.requires or ():
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in ("", *req.extras)):
                sub.marker = None  # met for this parent; must not be evaluated again without its extras
                todo.append(sub)
    return needed


def link_distributions(dists: list[metadata.Distribution], into: Path) -> None:
    """Symlink each distribution's top-level files and folders (from its RECORD) into ``into``."""
    into.mkdir(parents=True)
    for dist in dists:
        if dist.files is None:
            raise LookupError(f"{dist.metadata['Name']} has no RECORD: cannot tell its files")
        site = Path(dist.locate_file(""))
        for top in {f.parts[0] for f in dist.files if f.parts[0] not in ("..", "__pycache__")}:
            link = into / top
            if not link.exists():
                link.symlink_to(site / top)


def write_console_scripts(dists: list[metadata.Distribution], bin_dir: Path) -> None:
    """The command-line scripts of the linked distributions (dagster, celery, ...), as pip writes them."""
    python = bin_dir / "python"
    for dist in dists:
        for entry in dist.entry_points.select(group="console_scripts"):
            script = bin_dir / entry.name
            # The __main__ guard matters: multiprocessing's spawn re-imports the script in its children.
            script.write_text(
                f"#!{python}\nimport sys\nfrom {entry.module} import {entry.attr.split('.')[0]}\n"
                f"if __name__ == '__main__':\n    sys.exit({entry.attr}())\n"
            )
            script.chmod(0o755)


def dockerfile_extras() -> tuple[str, ...]:
    """The extras deploy/Dockerfile installs (``deploy/install.sh SRC EXTRAS``), so tests install the same."""
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    match = re.search(r"^RUN sh \S*deploy/install\.sh\s+\S+\s+([\w,]+)", dockerfile, re.M)
    if match is None:
        raise LookupError("deploy/Dockerfile does not run deploy/install.sh SRC EXTRAS")
    return tuple(match.group(1).split(","))


def install_wheel(dest: Path, extras: tuple[str, ...] = ()) -> InstalledVenv:
    """A fresh venv in ``dest`` with tracelake installed from a wheel of the checkout by deploy/install.sh."""
    root = dest / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    deps = dependency_closure(declared_requirements(extras) + [Requirement(t) for t in BUILD_TOOLS])
    link_distributions(list(deps.values()), dest / "deps")
    write_console_scripts(list(deps.values()), root / "bin")
    # A .pth line puts the linked folder on sys.path after the venv's own site-packages (its .pth files unread).
    site = next((root / "lib").glob("python3*/site-packages"))
    (site / "linked_deps.pth").write_text(f"{dest / 'deps'}\n")
    installed = InstalledVenv(root)
    source = _source_copy(dest / "src")
    env = installed.env(
        PIP_NO_INDEX="1", PIP_NO_DEPS="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_BUILD_ISOLATION="0",  # pip's inverted switch: 0 turns build isolation off (setuptools is linked)
    )
    done = subprocess.run(["sh", str(ROOT / "deploy" / "install.sh"), str(source), ",".join(extras)],
                          cwd=dest, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"deploy/install.sh failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return installed


def _source_copy(dest: Path) -> Path:
    """The checkout's files as git sees them (tracked and new, not ignored): what `COPY . .` sends in the image."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        path = ROOT / rel
        if path.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(path.read_bytes())
    return dest
