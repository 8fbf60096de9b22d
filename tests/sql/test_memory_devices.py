"""GPU memory of every accelerator the profiler names reaches memory_timeline and memory_peaks, not only CUDA's.

Seen on TraceLens' MI300X inference trace (AMD-AGI/TraceLens, tests/traces/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005
.json.gz): 2,588 ``[memory]`` events with ``Device Type`` 6 (c10::DeviceType::HIP) and 1.1-2.5 GB allocated, of which
the marts kept none, showing only the 104 CPU events. The fixture here is that pattern, hand-written: ``[memory]``
instant events (cat cpu_instant_event, scope t) with the trace's own first values, on HIP, and also on XPU (12) and
MTIA (19), the other accelerators c10 numbers that kineto profiles; plus one CPU event (type 0, id -1).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.lake.lake import Lake
from pipelines.lake.read import open_lake
from pipelines.sources import discover_runs
from transforms.composition.ingest import ingest_run

BASE_NS = 1_751_410_836_000_000_000
DEVICE_TYPES = {"hip": 6, "xpu": 12, "mtia": 19}
# (ts µs, Bytes, Total Allocated, Total Reserved) on device 0, from the MI300X trace's first GPU records; then a free
GPU_RECORDS = [
    (105, 18874368, 1104280064, 2533359616),
    (200, 4608, 1104284672, 2533359616),
    (300, -18874368, 1085410304, 2533359616),
]


def memory_event(ts: int, nbytes: int, allocated: int, reserved: int, device_type: int, device_id: int) -> dict:
    return {
        "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 23232, "tid": 23232, "ts": ts,
        "args": {"Total Reserved": reserved, "Total Allocated": allocated, "Bytes": nbytes, "Device Id": device_id,
                 "Device Type": device_type, "Addr": 140255988547584 + ts, "finished": True},
    }


def write_trace(folder: Path, device_type: int) -> None:
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 23232, "tid": 23232, "ts": 0,
         "dur": 1000},
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 23232, "tid": 23232, "ts": 100, "dur": 10},
        memory_event(150, 8, 8, 8, device_type=0, device_id=-1),
        *(memory_event(*record, device_type=device_type, device_id=0) for record in GPU_RECORDS),
    ]
    folder.mkdir(parents=True)
    trace = {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": events,
             "baseTimeNanoseconds": BASE_NS}
    (folder / "rank-0.json").write_text(json.dumps(trace, indent=1))


@pytest.fixture(scope="module")
def memory_lake(tmp_path_factory: pytest.TempPathFactory):
    source = tmp_path_factory.mktemp("memory_devices")
    for run_id, device_type in DEVICE_TYPES.items():
        write_trace(source / run_id, device_type)
    lake_dir = tmp_path_factory.mktemp("memory_devices_lake")
    lake = Lake(str(lake_dir))
    for run in discover_runs(str(source)):
        ingest_run(run, lake, select={"memory_timeline", "memory_peaks"})
    return open_lake(str(lake_dir))


@pytest.mark.parametrize("run_id", DEVICE_TYPES)
def test_accelerator_memory_is_on_the_curve(memory_lake, run_id: str) -> None:
    curve = memory_lake.execute(
        "select device, ts_ns, allocated_bytes, reserved_bytes, delta_bytes from memory_timeline"
        " where run_id = $run order by device, event_idx", {"run": run_id}
    ).fetchall()
    cpu = (-1, BASE_NS + 150_000, 8, 8, 8)
    gpu = [(0, BASE_NS + ts * 1000, allocated, reserved, nbytes) for ts, nbytes, allocated, reserved in GPU_RECORDS]
    assert curve == [cpu, *gpu]


@pytest.mark.parametrize("run_id", DEVICE_TYPES)
def test_accelerator_memory_has_its_peak(memory_lake, run_id: str) -> None:
    peaks = memory_lake.execute(
        "select device, peak_allocated_bytes, peak_reserved_bytes, peak_ts_ns, peak_step from memory_peaks"
        " where run_id = $run order by device", {"run": run_id}
    ).fetchall()
    # device 0 peaks at the second record (1,104,284,672 bytes at 200 µs), inside ProfilerStep#3 [0, 1000) µs
    assert peaks == [(-1, 8, 8, BASE_NS + 150_000, 3), (0, 1104284672, 2533359616, BASE_NS + 200_000, 3)]
