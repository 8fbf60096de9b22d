"""op_tree_nest's numpy nesting against the definitions of int_op_tree's columns, counted out range by range."""

from __future__ import annotations

import duckdb
import numpy as np

from transforms.op_tree import nest, register_functions


def nested_ranges(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Ranges on a coarse clock (many equal starts and ends), nested and overlapping, some of zero length."""
    ts = rng.integers(0, 40, count)
    end = ts + rng.choice([0, 1, 2, 5, 20], count)
    return ts, end


def by_definition(ts: np.ndarray, end: np.ndarray, idx: np.ndarray) -> dict[str, list]:
    """pos by (start, longer first, trace order); depth the earlier ranges of positive length still open at the
    start; last_pos the last position starting before the end; parent the nearest earlier position one level up;
    only_child the single child of its parent."""
    n = len(ts)
    order = sorted(range(n), key=lambda i: (ts[i], -end[i], idx[i]))
    pos = {i: p for p, i in enumerate(order, 1)}
    depth = {i: sum(1 for j in order[: pos[i] - 1] if end[j] > ts[j] and end[j] > ts[i]) for i in range(n)}
    last = {i: max(pos[i], sum(1 for j in range(n) if ts[j] < end[i])) for i in range(n)}
    parent = {}
    for i in range(n):
        up = [j for j in order[: pos[i] - 1] if depth[j] == depth[i] - 1]
        parent[i] = up[-1] + 1 if up else 0
    children = {k: sum(1 for i in range(n) if parent[i] == k) for k in range(1, n + 1)}
    return {
        "pos": [pos[i] for i in range(n)],
        "depth": [depth[i] for i in range(n)],
        "last_pos": [last[i] for i in range(n)],
        "parent": [parent[i] for i in range(n)],
        "only_child": [parent[i] > 0 and children[parent[i]] == 1 for i in range(n)],
    }


def test_nest_follows_the_definitions_on_random_ranges():
    rng = np.random.default_rng(16)
    for count in (1, 2, 7, 60, 200):
        ts, end = nested_ranges(rng, count)
        idx = rng.permutation(count) * 3
        got = {name: values.tolist() for name, values in nest(ts, end, idx).items()}
        assert got == by_definition(ts, end, idx)


def test_the_duckdb_function_nests_each_row():
    con = duckdb.connect()
    register_functions(con)
    # Row 1: a [0, 10] holds b [0, 4] and c [4, 10]; row 2 has no ranges.
    rows = con.sql("""
        select op_tree_nest(ts, ends, idx) as nest
        from (values ([0, 0, 4], [10, 4, 10], [1, 2, 3]), ([], [], [])) as t (ts, ends, idx)
    """).fetchall()
    assert rows[0][0] == {"pos": [1, 2, 3], "depth": [0, 1, 1], "last_pos": [3, 2, 3], "parent": [0, 1, 1],
                          "only_child": [False, False, False]}
    assert rows[1][0] == {"pos": [], "depth": [], "last_pos": [], "parent": [], "only_child": []}
