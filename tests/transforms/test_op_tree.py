"""op_tree: a thread's host ranges linked into its tree, with their figures, against a hand-worked thread and a
plain sweep of the definitions."""

from __future__ import annotations

import math
import random

import duckdb
import pytest

from transforms.op_tree import RANGE, register_functions

LINKED_FIELDS = (
    "event_idx", "depth", "pos", "parent_event_idx", "last_pos", "merged_into_parent", "children_ns",
    "device_total_ns", "kernel_count",
)


def _op_tree(ranges: list[dict]) -> list[dict]:
    con = duckdb.connect()
    register_functions(con)
    (linked,) = con.execute(f"select op_tree($ranges::{RANGE}[])", {"ranges": ranges}).fetchone()
    return linked


def _range(event_idx: int, ts: int | None, dur: int | None, name: int = 0, device_ns: int = 0) -> dict:
    return {"event_idx": event_idx, "ts_ns": ts, "dur_ns": dur, "name_key": name, "is_operator": True,
            "is_plain_operator": True, "torch_tree": True, "device_ns": device_ns, "kernel_count": int(device_ns > 0)}


def test_a_thread_links_by_time_containment():
    # 0 [0, 100) holds 1 [10, 50) (same name: its only child, merged) which holds 2 [10, 20) and the instant 3 at
    # 20; 4 [50, 60) starts as 1 ends, so it is 0's child; 5 has no start time: it sorts last and holds nothing.
    # 2 and 4 launched a kernel each (5 and 7 ns).
    linked = _op_tree([
        _range(4, 50, 10, device_ns=7), _range(0, 0, 100, name=7), _range(2, 10, 10, device_ns=5),
        _range(1, 10, 40, name=7), _range(3, 20, 0), _range(5, None, 5),
    ])
    got = [tuple(row[f] for f in LINKED_FIELDS) for row in linked]
    assert got == [
        # event_idx, depth, pos, parent, last_pos, merged, children's time inside, device total, kernels
        (0, 0, 1, None, 5, False, 40 + 10, 12, 2),
        (1, 1, 2, 0, 4, False, 10 + 0, 5, 1),  # 0 has two children (1 and 4): 1 is no only child
        (2, 2, 3, 1, 3, False, 0, 5, 1),
        (3, 2, 4, 1, 4, False, 0, 0, 0),
        (4, 1, 5, 0, 5, False, 0, 7, 1),
        (5, 0, 6, None, 6, False, 0, 0, 0),
    ]
    only = _op_tree([_range(0, 0, 100, name=7), _range(1, 10, 40, name=7), _range(2, 10, 10)])
    assert [row["merged_into_parent"] for row in only] == [False, True, False]


def _sweep(ranges: list[dict]) -> list[tuple]:
    """The definitions of transforms/op_tree.py walked one edge and one range at a time."""
    def key(value: int | None) -> float:
        return math.inf if value is None else value

    ranges = [{**r, "end_ns": None if r["ts_ns"] is None or r["dur_ns"] is None else r["ts_ns"] + r["dur_ns"]}
              for r in ranges]
    ordered = sorted(ranges, key=lambda r: (key(r["ts_ns"]), -key(r["end_ns"]) if r["end_ns"] is not None
                                            else math.inf, r["event_idx"]))
    n = len(ordered)
    has_length = [r["ts_ns"] is not None and r["dur_ns"] is not None and r["dur_ns"] > 0 for r in ordered]
    edges = [(key(r["ts_ns"]), 1, pos) for pos, r in enumerate(ordered)]
    edges += [(key(r["end_ns"]), 0, pos) for pos, r in enumerate(ordered) if has_length[pos]]
    depth, last_pos, open_ranges, started = [0] * n, list(range(1, n + 1)), 0, 0
    for _, is_start, pos in sorted(edges):
        if is_start:
            depth[pos] = open_ranges
            open_ranges += has_length[pos]
            started += 1
        else:
            open_ranges -= 1
            last_pos[pos] = max(started, pos + 1)
    parent = [next((p for p in range(i - 1, -1, -1) if depth[p] == depth[i] - 1), None) for i in range(n)]
    first_child = [i > 0 and depth[i - 1] == depth[i] - 1 for i in range(n)]
    rows = []
    for i, r in enumerate(ordered):
        later = [j for j in range(i + 1, n) if depth[j] == depth[i]]
        only = first_child[i] and (not later or first_child[later[0]])
        p = parent[i]
        merged = only and p is not None and ordered[p]["name_key"] == r["name_key"]
        children = [c for c in range(n) if parent[c] == i]
        inside = sum(max(0, min(key(ordered[c]["end_ns"]), r["end_ns"]) - ordered[c]["ts_ns"]) for c in children)
        subtree = ordered[i:last_pos[i]]
        rows.append((r["event_idx"], depth[i], i + 1, None if p is None else ordered[p]["event_idx"], last_pos[i],
                     merged, inside, sum(s["device_ns"] for s in subtree), sum(s["kernel_count"] for s in subtree)))
    return rows


@pytest.mark.parametrize("seed", range(40))
def test_random_threads_link_as_a_sweep_does(seed: int):
    rnd = random.Random(seed)
    ranges = [
        _range(i, rnd.choice([None, *range(0, 40, 3)]), rnd.choice([None, 0, -2, *range(1, 25)]), rnd.randint(0, 2),
               rnd.choice([0, 0, 3, 11]))
        for i in range(rnd.randint(1, 80))
    ]
    rnd.shuffle(ranges)
    assert [tuple(row[f] for f in LINKED_FIELDS) for row in _op_tree(ranges)] == _sweep(ranges)
