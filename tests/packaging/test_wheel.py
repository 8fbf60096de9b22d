"""tracelake installed from its wheel (deploy/install.sh, as the Docker image does) into a fresh venv outside the
checkout, with nothing but its declared dependencies: it holds every module and data file, finds its SQL models,
and ingests real traces into a lake identical to the checkout's, without torch."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import tracelake
from tests.support.installed import InstalledVenv, dockerfile_extras, install_wheel
from tests.support.servers import ROOT
from tracelake.ingest import ingest
from tracelake.workloads import ATTRIBUTION_RUN_ID, CPU_RUN_ID, GLOO_RUN_ID, PIPELINE_RUN_ID
from transforms.models import discover_models

# Checkout folder → where the wheel puts it (pyproject.toml [tool.setuptools] package-dir).
SHIPPED = {"sql": "transforms/sql", "examples/traces": "tracelake/sample_traces"}
PACKAGES = ("pipelines", "transforms", "dagster_project", "tracelake")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> InstalledVenv:
    return install_wheel(tmp_path_factory.mktemp("wheel"), extras=dockerfile_extras())


@pytest.fixture(scope="module")
def site_packages(installed: InstalledVenv, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = installed.python("import sysconfig; print(sysconfig.get_paths()['purelib'])",
                           cwd=tmp_path_factory.mktemp("elsewhere"))
    return Path(out.strip())


def _files(root: Path, pattern: str = "*") -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob(pattern) if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.slow
def test_the_wheel_holds_every_module_and_data_file(site_packages: Path) -> None:
    expected = {f"{package}/{f}" for package in PACKAGES for f in _files(ROOT / package, "*.py")}
    for folder, target in SHIPPED.items():
        expected |= {f"{target}/{f}" for f in _files(ROOT / folder)}
    assert expected - _files(site_packages) == set()
    # Installed as files, not as a link back to a checkout (an editable install would leave a .pth or finder).
    assert not list(site_packages.glob("__editable__*"))


@pytest.mark.slow
def test_the_installed_package_finds_its_models_outside_the_checkout(
    installed: InstalledVenv, site_packages: Path, tmp_path: Path
) -> None:
    found = json.loads(installed.python(
        "import json, importlib.util, tracelake, transforms.models as m;"
        "print(json.dumps({'root': str(m.default_sql_root()), 'models': sorted(m.discover_models()),"
        " 'torch': importlib.util.find_spec('torch') is not None, 'tracelake': tracelake.__file__}))",
        cwd=tmp_path,
    ))
    assert found["root"] == str(site_packages / "transforms" / "sql")
    assert found["tracelake"].startswith(str(site_packages))
    assert found["models"] == sorted(discover_models())
    assert found["torch"] is False  # torch is the `profile` extra; ingestion must not need it


@pytest.mark.slow
def test_the_installed_package_ingests_like_the_checkout(
    installed: InstalledVenv, tmp_path: Path, shared_traces: Path, cpu_traces_dir: Path, gloo_traces_dir: Path,
    attribution_traces_dir: Path, pipeline_traces_dir: Path,
) -> None:
    # Real NCCL and ResNet GPU traces (collectives, kernel sequences), torch CPU traces (memory events; a slow gloo
    # rank; stacks, modules, shapes; a 2-stage pipeline): every analysis table gets rows.
    source = tmp_path / "traces"
    for run in ("nccl_rank0_of_2", "simple_add"):
        shutil.copytree(shared_traces / run, source / run)
    for made, run in ((cpu_traces_dir, CPU_RUN_ID), (gloo_traces_dir, GLOO_RUN_ID),
                      (attribution_traces_dir, ATTRIBUTION_RUN_ID), (pipeline_traces_dir, PIPELINE_RUN_ID)):
        shutil.copytree(made / run, source / run)
    done = subprocess.run([installed.bin("tracelake"), "ingest", str(source), "--lake", str(tmp_path / "lake")],
                          cwd=tmp_path, env=installed.env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    tables = sorted(name for name, model in discover_models().items() if model.layer == "marts")
    count = "select count(*) from {}"
    installed_counts = json.loads(installed.python(
        "import json, tracelake; con = tracelake.open_lake('lake');"
        f"print(json.dumps({{t: con.execute({count!r}.format(t)).fetchone()[0] for t in {tables!r}}}))",
        cwd=tmp_path,
    ))
    assert [t for t, n in installed_counts.items() if n == 0] == []
    assert ingest(str(source), str(tmp_path / "checkout_lake"), record=False) == 0
    con = tracelake.open_lake(str(tmp_path / "checkout_lake"))
    assert installed_counts == {t: con.execute(count.format(t)).fetchone()[0] for t in tables}


@pytest.mark.slow
def test_the_installed_command_describes_the_analysis_tables(installed: InstalledVenv, tmp_path: Path) -> None:
    listed = subprocess.run([installed.bin("tracelake"), "tables", "--format", "json"], cwd=tmp_path,
                            env=installed.env(), capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    layers = {row["table"]: row["layer"] for row in json.loads(listed.stdout)}
    marts = {name for name, model in discover_models().items() if model.layer == "marts"}
    assert {name for name, layer in layers.items() if layer == "marts"} == marts
    one = subprocess.run([installed.bin("tracelake"), "tables", "step_breakdown"], cwd=tmp_path,
                         env=installed.env(), capture_output=True, text=True, timeout=120)
    assert one.returncode == 0, one.stderr
    assert one.stdout.startswith("step_breakdown (marts): One row per step") and "communication_ns" in one.stdout


@pytest.mark.slow
def test_the_code_location_loads_from_the_installed_package(installed: InstalledVenv, tmp_path: Path) -> None:
    jobs = installed.python(
        "import dagster_project.definitions as d; print(sorted(j.name for j in d.defs.jobs))", cwd=tmp_path
    )
    assert "ingest_run" in jobs
