"""``tracelake ui`` after ``tracelake ingest``, with nothing exported: what the ingest recorded shows (one default
instance home): the run's partition, each asset's materialization with its metadata and the checks' results, with
the lineage, over GraphQL and in a real headless Chromium (the asset graph and an asset's partitions); SIGTERM stops
every process the command started."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request

import numpy as np
import psutil
import pytest

from pipelines.tables import RAW_TABLES
from tests.support.browser import chromium
from tests.support.png import decode_png
from tests.support.servers import EXAMPLE_TRACES, ROOT, free_port, wait_for, wait_for_http

pytestmark = pytest.mark.slow

LINEAGE = """
{ assetNodes { assetKey { path } dependencyKeys { path } groupName isPartitioned
  partitionStats { numMaterialized }
  assetMaterializations(partitions: ["rocm_mi250"]) { partition metadataEntries { label } }
  assetChecksOrError { ... on AssetChecks { checks { name executionForLatestMaterialization { status } } } } } }
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


def test_ui_shows_ingested_runs_and_lineage_and_stops_on_sigterm(tmp_path):
    # A user's machine: HOME of its own, no DAGSTER_HOME or TRACELAKE_* exported.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "TRACELAKE_"))}
    env |= {"HOME": str(tmp_path / "user"), "PYTHONPATH": str(ROOT), "TRACELAKE_LAKE": str(tmp_path / "not-this")}
    lake, source = tmp_path / "lake", tmp_path / "traces"
    shutil.copytree(EXAMPLE_TRACES / "rocm_mi250", source / "rocm_mi250")
    cli = [sys.executable, "-m", "tracelake.cli"]
    ingest = subprocess.run([*cli, "ingest", str(source), "--lake", str(lake)], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert ingest.returncode == 0, ingest.stdout + ingest.stderr
    assert (tmp_path / "user" / ".tracelake" / "dagster").is_dir()  # the default home named in the README

    port = free_port()
    with (tmp_path / "ui.log").open("wb") as log:
        ui = subprocess.Popen([*cli, "ui", "--lake", str(lake), "--host", "127.0.0.1", "--port", str(port)],
                              env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/server_info", timeout=120)
        nodes = _graphql(port, LINEAGE)["assetNodes"]
        _graphql(port, "mutation { setNuxSeen }")  # the first-visit modal would cover the pages
        with chromium() as browser:
            shots = {}
            for name, path, drawn in (("graph", "/asset-groups", "marts"),
                                      ("partitions", "/assets/marts/runs?view=partitions", "rocm_mi250")):
                with browser.page() as page:
                    page.goto(f"http://127.0.0.1:{port}{path}", width=1400, height=900)
                    wait_for(lambda: drawn in page.evaluate("document.body.innerText"),  # noqa: B023 (used at once)
                             timeout=60, interval=0.5, what=f"the {name} page to draw")
                    shots[name] = (page.evaluate("document.body.innerText"),
                                   decode_png(page.screenshot(tmp_path / f"{name}.png", full_page=False)))
        children = psutil.Process(ui.pid).children(recursive=True)
        assert children, "tracelake ui started no dagster processes"
        ui.send_signal(signal.SIGTERM)
        assert ui.wait(timeout=60) == 0
        _, alive = psutil.wait_procs(children, timeout=30)
        assert not alive, f"left running after SIGTERM: {[p.cmdline() for p in alive]}"
    finally:
        if ui.poll() is None:
            ui.kill()

    assert f"lake {lake}" in (tmp_path / "ui.log").read_text()  # --lake wins over TRACELAKE_LAKE
    by_key = {"/".join(n["assetKey"]["path"]): n for n in nodes}
    assert {f"raw/{t}" for t in RAW_TABLES} <= set(by_key)
    assert {"report", "fleet_view"} <= set(by_key)
    runs_mart = by_key["marts/runs"]
    assert {"/".join(d["path"]) for d in runs_mart["dependencyKeys"]} >= {"raw/traces", "raw/devices"}
    checks = {c["name"]: c["executionForLatestMaterialization"] for c in runs_mart["assetChecksOrError"]["checks"]}
    assert checks["grain_unique"] == {"status": "SUCCEEDED"} and checks["value_ranges"] == {"status": "SUCCEEDED"}
    for key, node in by_key.items():  # every asset of the run, recorded with its metadata
        if key == "fleet_view":
            continue
        assert node["partitionStats"] == {"numMaterialized": 1}, key
        (materialization,) = node["assetMaterializations"]
        assert materialization["partition"] == "rocm_mi250" and materialization["metadataEntries"], key
    labels = {e["label"] for e in runs_mart["assetMaterializations"][0]["metadataEntries"]}
    assert {"dagster/row_count", "preview", "snapshot"} <= labels

    partitions_text, partitions_png = shots["partitions"]
    assert "rocm_mi250" in partitions_text
    graph_text, graph_png = shots["graph"]
    assert "marts" in graph_text and "raw" in graph_text, graph_text
    for pixels in (partitions_png, graph_png):
        assert pixels.shape[:2] == (900, 1400)
        assert pixels[..., :3].astype(float).mean(axis=2).std() > 10, "the screenshot is blank"
    assert len(np.unique(graph_png[..., :3].reshape(-1, 3), axis=0)) > 50, "too few colours to be a graph"
