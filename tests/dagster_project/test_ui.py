"""``tracelake ui`` serves the asset graph: lineage over GraphQL and a headless Chromium screenshot."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

import numpy as np
import pytest

from tests.support.png import decode_png
from tests.support.servers import EXAMPLE_TRACES, ROOT, free_port, process_group, wait_for_http
from pipelines.tables import RAW_TABLES

pytestmark = pytest.mark.slow

LINEAGE = """
{ assetNodes { assetKey { path } dependencyKeys { path } groupName isPartitioned
  assetChecksOrError { ... on AssetChecks { checks { name } } } } }
"""


def _graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        body = json.loads(response.read())
    assert "errors" not in body, body["errors"]
    return body["data"]


def _screenshot(url: str, path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--virtual-time-budget=20000", "--window-size=1400,900",
             f"--screenshot={path}", url],
            check=True, capture_output=True, timeout=120,
        )


def test_ui_serves_lineage_and_draws_the_asset_graph(example_lake, tmp_path):
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tracelake.cli", "ui", "--lake", str(example_lake),
               "--source", str(EXAMPLE_TRACES), "--port", str(port)]
    with process_group(command, env=env, log=tmp_path / "ui.log"):
        wait_for_http(f"http://127.0.0.1:{port}/server_info", timeout=90)
        nodes = _graphql(port, LINEAGE)["assetNodes"]
        _graphql(port, "mutation { setNuxSeen }")  # the first-visit modal would cover the graph
        _screenshot(f"http://127.0.0.1:{port}/asset-groups", tmp_path / "graph.png")

    by_key = {"/".join(n["assetKey"]["path"]): n for n in nodes}
    assert {f"raw/{t}" for t in RAW_TABLES} <= set(by_key)
    runs = by_key["marts/runs"]
    assert {"/".join(d["path"]) for d in runs["dependencyKeys"]} >= {"raw/traces", "raw/devices"}
    assert {n["groupName"] for n in nodes} >= {"raw", "marts"}
    assert all(n["isPartitioned"] for n in nodes)
    assert {c["name"] for c in runs["assetChecksOrError"]["checks"]} >= {"grain_unique"}

    pixels = decode_png((tmp_path / "graph.png").read_bytes())
    assert pixels.shape[:2] == (900, 1400)
    gray = pixels[..., :3].astype(float).mean(axis=2)
    assert gray.std() > 10, "the screenshot is blank"
    assert len(np.unique(pixels[..., :3].reshape(-1, 3), axis=0)) > 50, "the screenshot has too few colors to be a graph"
