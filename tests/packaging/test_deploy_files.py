"""deploy/compose.yaml describes the topology tests/fleet runs: the same image, commands and settings."""

from __future__ import annotations

import yaml

from tests.support.installed import dockerfile_extras
from tests.support.servers import ROOT

COMPOSE = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
TRACELAKE_SERVICES = ("code", "daemon", "webserver", "worker")
# What dagster_project.fleet and deploy/*.yaml read from the environment.
REQUIRED_ENV = {"DAGSTER_PG_URL", "TRACELAKE_CELERY_BROKER", "TRACELAKE_CELERY_BACKEND", "TRACELAKE_STEP_IO",
                "TRACELAKE_SOURCE", "TRACELAKE_LAKE"}


def test_the_image_installs_the_fleet_extra() -> None:
    assert "fleet" in dockerfile_extras()


def test_compose_runs_the_fleet_topology_from_one_image() -> None:
    services = COMPOSE["services"]
    assert set(TRACELAKE_SERVICES) | {"postgres", "redis", "s3"} <= set(services)
    for name in TRACELAKE_SERVICES:
        service = services[name]
        assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}, name
        assert set(service["environment"]) >= REQUIRED_ENV, name
    assert services["worker"]["command"][:5] == ["dagster-celery", "worker", "start", "-A", "dagster_celery.app"]
    assert services["daemon"]["command"][:2] == ["dagster-daemon", "run"]


def test_compose_points_the_services_at_its_own_servers() -> None:
    env = COMPOSE["services"]["worker"]["environment"]
    assert "@postgres:5432/" in env["DAGSTER_PG_URL"] and env["DAGSTER_PG_URL"].startswith("postgresql+psycopg2://")
    assert env["TRACELAKE_CELERY_BROKER"].startswith("redis://redis:6379/")
    assert env["AWS_ENDPOINT_URL"] == "http://s3:8333"
    workspace = yaml.safe_load((ROOT / "deploy" / "workspace.yaml").read_text())
    assert workspace["load_from"][0]["grpc_server"]["host"] == "code"
