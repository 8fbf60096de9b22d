"""The chunker lets go of each chunk it hands out: parse memory holds the chunks being decoded, no more."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from bench.make_trace import DEFAULT_SOURCE, write_trace
from pipelines.jsonstream import EventChunker, open_decompressed

pytestmark = pytest.mark.skipif(not DEFAULT_SOURCE.exists(), reason="shared traces not found")

CHUNK_BYTES = 24 << 20


def test_a_dropped_chunk_is_freed_before_the_next_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    with open(path, "wb") as out:
        write_trace(DEFAULT_SOURCE, out, 4 * CHUNK_BYTES)

    held_after_drop: list[int] = []
    chunks = 0
    tracemalloc.start()
    try:
        with open(path, "rb") as raw:
            for chunk in EventChunker(open_decompressed(raw), chunk_bytes=CHUNK_BYTES):
                chunks += 1
                del chunk
                held_after_drop.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()

    assert chunks >= 3
    # What may stay is the read block and the events after the last cut: less than a chunk.
    assert max(held_after_drop) < CHUNK_BYTES, [n >> 20 for n in held_after_drop]
