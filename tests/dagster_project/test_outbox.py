"""The outbox of each lake, posted to a real Dagster instance: ``tracelake ui --lake A`` posts and shows lake A's
runs alone, each once, at its ingest's time; a poster killed mid-post leaves its record to the next; a record
posted again posts nothing twice; an outbox keeps a bounded number of records; nothing writes ``os.environ``."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import dagster as dg
import orjson
import pytest

import dagster_project.home
from dagster_project.home import dagster_home, lake_key
from dagster_project.outbox import RunRecord, lease_records, leave_records, records_folder
from dagster_project.record import _events, open_instance, post_records
from pipelines.lake.lake import ALIAS, Lake
from pipelines.lake.read import read_lake
from tests.cli.conftest import tracelake
from tests.support.servers import EXAMPLE_TRACES, ROOT, wait_for
from tracelake.ui import _post_records


@dataclasses.dataclass(frozen=True)
class Ingested:
    """Two lakes ingested with nothing exported, B (rocm_mi250) then A (simple_add): their homes and A's record."""

    user: Path
    a: Lake
    b: Lake
    home_a: Path
    home_b: Path
    record_a: bytes


def _recorded_home(stdout: str) -> Path:
    return Path(re.search(r"recorded 1 run for the Dagster instance at (\S+) ", stdout)[1])  # type: ignore[index]


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Ingested:
    tmp = tmp_path_factory.mktemp("outbox")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "TRACELAKE_"))}
    env |= {"HOME": str(tmp / "user"), "PYTHONPATH": str(ROOT)}
    homes = {}
    for name, run in (("B", "rocm_mi250"), ("A", "simple_add")):
        done = tracelake("ingest", str(EXAMPLE_TRACES / run), "--lake", str(tmp / name), env=env)
        assert done.code == 0, done.stdout + done.stderr
        homes[name] = _recorded_home(done.stdout)
    a = Lake(str(tmp / "A"))
    (record,) = sorted(records_folder(homes["A"], a).iterdir())
    return Ingested(tmp / "user", a, Lake(str(tmp / "B")), homes["A"], homes["B"], record.read_bytes())


def _partitions_of_materializations(instance: dg.DagsterInstance) -> dict[str, Counter[str | None]]:
    return {key.to_user_string(): Counter(r.asset_materialization.partition
                                          for r in instance.fetch_materializations(key, limit=1000).records
                                          if r.asset_materialization)
            for key in instance.get_asset_keys()}


def _check_counts(instance: dg.DagsterInstance, record: RunRecord) -> dict[str, int]:
    keys = [dg.AssetCheckKey(e.asset_key, e.check_name) for e in _events(record) if isinstance(e, dg.AssetCheckEvaluation)]
    assert keys
    return {key.to_user_string(): len(instance.event_log_storage.get_asset_check_execution_history(key, limit=1000))
            for key in keys}


@pytest.mark.slow
def test_the_ui_of_a_lake_posts_and_shows_that_lakes_runs_alone_each_once_at_its_ingest_time(
        ingested: Ingested, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A home per lake by default, under the README's ~/.tracelake/dagster.
    root = ingested.user / ".tracelake" / "dagster"
    assert ingested.home_a == root / lake_key(ingested.a) and ingested.home_b == root / lake_key(ingested.b)
    assert ingested.home_a != ingested.home_b

    posting_started = time.time()
    _post_records(ingested.a, ingested.home_a)  # what `tracelake ui --lake A` does before starting dagster dev
    assert capsys.readouterr().out == (f"posted 1 run of {ingested.a.url} to the Dagster home {ingested.home_a}: "
                                       "simple_add\n")
    with open_instance(ingested.home_a) as instance:
        assert instance.get_dynamic_partitions("trace_runs") == ["simple_add"]
        shown = _partitions_of_materializations(instance)
        assert len(shown) > 30 and all(c == Counter({"simple_add": 1}) for c in shown.values()), shown
        latest = instance.fetch_materializations(dg.AssetKey(["marts", "runs"]), limit=1).records[0]
    metadata = latest.asset_materialization.metadata  # type: ignore[union-attr]
    with read_lake(ingested.a) as con:  # the snapshot's own time: when the ingest committed the run
        (committed,) = con.execute(f"select epoch(snapshot_time) from {ALIAS}.snapshots() "
                                   f"where snapshot_id = {metadata['snapshot'].value}").fetchone()
    assert metadata["ingested_at"].value == pytest.approx(committed) and committed < posting_started
    assert list(records_folder(ingested.home_b, ingested.b).iterdir()), "lake B's record was posted by A's UI"

    # A DAGSTER_HOME of the user's own, holding both lakes' records: the UI of A posts A's alone.
    shared = tmp_path / "shared"
    monkeypatch.setenv("DAGSTER_HOME", str(shared))
    (record_b,) = records_folder(ingested.home_b, ingested.b).iterdir()
    leave_records([RunRecord.from_json(record_b.read_bytes())], ingested.b)
    leave_records([RunRecord.from_json(ingested.record_a)], ingested.a)
    assert dagster_home(ingested.a) == dagster_home(ingested.b) == shared
    with open_instance(shared) as instance:
        assert [run for runs in post_records(instance, ingested.a) for run in runs] == ["simple_add"]
        assert instance.get_dynamic_partitions("trace_runs") == ["simple_add"]
    assert len(list(records_folder(shared, ingested.b).iterdir())) == 1


POSTER = """
import sys
from pathlib import Path
from dagster_project.record import open_instance, post_records
from pipelines.lake.lake import Lake
with open_instance(Path(sys.argv[1])) as instance:
    for runs in post_records(instance, Lake(sys.argv[2]), batch=1):
        print(*runs, flush=True)
"""


def _copies(template: bytes, count: int) -> list[RunRecord]:
    """Records of ``count`` runs made from a real one (run ids and versions of their own)."""
    record = RunRecord.from_json(template)
    return [dataclasses.replace(record, run_id=f"run{i}", version=f"{record.version}-{i}") for i in range(count)]


@pytest.mark.slow
def test_a_poster_killed_mid_post_leaves_its_record_to_the_next_and_nothing_is_posted_twice(
        ingested: Ingested, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    records = _copies(ingested.record_a, 3)
    leave_records(records, ingested.a)
    events = _events(records[0])
    first, last = events[0].asset_key, events[-1].asset_key
    with open_instance(home) as instance:  # made here: the poster opens an existing home
        def count(key: dg.AssetKey) -> int:
            return len(instance.fetch_materializations(key, limit=100).records)

        poster = subprocess.Popen([sys.executable, "-c", POSTER, str(home), ingested.a.url], cwd=ROOT,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
        try:  # killed once one record is posted in part: its first event is there, its last is not
            wait_for(lambda: poster.poll() is not None or count(first) > count(last), timeout=600, interval=0.05,
                     what="the poster to be mid-post")
            poster.send_signal(signal.SIGKILL)
        finally:
            poster.wait(timeout=60)
        assert poster.returncode == -signal.SIGKILL, "the poster finished before it could be killed mid-post"
        assert count(first) > count(last), "killed between two records, not mid-post"
        left = {RunRecord.from_json(path.read_bytes()).run_id for path in records_folder(home, ingested.a).iterdir()}
        assert left  # the killed poster's record among them

        successor = [run for runs in post_records(instance, ingested.a) for run in runs]

        assert sorted(successor) == sorted(left)
        assert list(records_folder(home, ingested.a).iterdir()) == []
        runs = [r.run_id for r in records]
        assert sorted(instance.get_dynamic_partitions("trace_runs")) == runs
        shown = _partitions_of_materializations(instance)
        assert len(shown) > 30 and all(c == Counter(dict.fromkeys(runs, 1)) for c in shown.values()), shown
        assert set(_check_counts(instance, records[0]).values()) == {3}  # each check once per run


@pytest.mark.slow
def test_a_record_posted_again_posts_nothing_twice_and_nothing_writes_the_environment(
        ingested: Ingested, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DAGSTER_HOME")
    monkeypatch.setattr(dagster_project.home, "DEFAULT_ROOT", tmp_path / "default")
    (record,) = _copies(ingested.record_a, 1)
    home = dagster_home(ingested.a)
    for _ in range(2):  # the record, then a copy of it (a post that was retried)
        leave_records([record], ingested.a)
        with open_instance(home) as instance:
            assert [run for runs in post_records(instance, ingested.a) for run in runs] == ["run0"]
            shown = _partitions_of_materializations(instance)
            assert len(shown) > 30 and all(c == Counter({"run0": 1}) for c in shown.values()), shown
            assert set(_check_counts(instance, record).values()) == {1}
    assert home == tmp_path / "default" / lake_key(ingested.a)
    assert "DAGSTER_HOME" not in os.environ


def _record(run_id: str) -> RunRecord:
    return RunRecord(run_id, 1, "v", None, 0, 0, None)


def test_an_outbox_keeps_the_newest_records_and_sweeps_killed_writers_partials(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    lake = Lake(str(tmp_path / "lake"))
    folder = records_folder(tmp_path / "home", lake)
    folder.mkdir(parents=True)
    stale, fresh = folder / ".partial-stale.json", folder / ".partial-fresh.json"
    for partial in (stale, fresh):
        partial.write_text("{")
    os.utime(stale, (time.time() - 2 * 3600,) * 2)  # a writer killed two hours ago

    assert leave_records([_record(f"r{i}") for i in range(3)], lake, keep=3).dropped == []
    left = leave_records([_record("r3"), _record("r4")], lake, keep=3)

    assert left.dropped == ["r0", "r1"]
    waiting = [orjson.loads(p.read_bytes())["run_id"] for p in sorted(folder.glob("[!.]*"))]
    assert waiting == ["r2", "r3", "r4"]
    assert not stale.exists() and fresh.exists()


def test_a_record_leased_by_a_live_poster_is_passed_by_and_taken_up_once_it_is_released(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    lake = Lake(str(tmp_path / "lake"))
    folder = leave_records([_record("a"), _record("b")], lake).folder
    holder = lease_records(folder)
    held = next(holder)  # a poster mid-post of "a"
    assert [RunRecord.from_json(lease.data).run_id for lease in lease_records(folder)] == ["b"]
    holder.close()  # its lease released (as by its death)
    assert [RunRecord.from_json(lease.data).run_id for lease in lease_records(folder)] == ["a", "b"]
    assert held.path.exists()
