"""How one thread's host ranges nest, as the DuckDB function ``op_tree_nest`` that
``sql/intermediate/int_op_tree.sql`` calls once per (tree, thread) with the thread's ranges as lists.

A window over every start and end of a thread sorts far more rows than numpy needs: with the ranges in start order,
depth and subtree extent are two binary searches and the parent a running maximum per depth.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

FUNCTION = "op_tree_nest"
RESULT = pa.struct([
    ("pos", pa.list_(pa.int32())),
    ("depth", pa.list_(pa.int32())),
    ("last_pos", pa.list_(pa.int32())),
    ("parent", pa.list_(pa.int32())),
    ("only_child", pa.list_(pa.bool_())),
])


def nest(ts_ns: np.ndarray, end_ns: np.ndarray, event_idx: np.ndarray) -> dict[str, np.ndarray]:
    """The nesting of one thread's ranges [ts, end), per range in the order given.

    pos: 1-based rank by start (ties: the longer first, then trace order). depth: the ranges of positive length
    open at its start (one ending at that instant is closed). last_pos: the last position starting before it ends,
    at least its own; its subtree is pos .. last_pos. parent: 1-based index (into the input) of the nearest earlier
    position one level up, 0 for none: a range right after one a level up is a first child of it, and a later range
    at the same depth shares the parent of the last first child before it. only_child: a first child whose next
    range at its depth is another first child, or none.
    """
    n = len(ts_ns)
    order = np.lexsort((event_idx, -end_ns, ts_ns))
    ts, end = ts_ns[order], end_ns[order]
    has_length = end > ts
    # Ranges of positive length open at a start: those starting earlier in pos order less those ended by then.
    opened = np.cumsum(has_length) - has_length
    depth = opened - np.searchsorted(np.sort(end[has_length]), ts, side="right")
    last_pos = np.maximum(np.searchsorted(ts, end, side="left"), np.arange(1, n + 1))

    first_child = np.zeros(n, dtype=bool)
    first_child[1:] = depth[1:] == depth[:-1] + 1
    by_depth = np.argsort(depth, kind="stable")  # pos order within each depth
    # Forward fill of the first children's parents (the position before them) within each depth: a running
    # maximum, each depth lifted above all lower ones so that none carries into the next.
    lift = depth[by_depth].astype(np.int64) * (n + 1)
    candidate = np.where(first_child, np.arange(n) - 1, -1)[by_depth] + lift
    parent_pos = np.empty(n, dtype=np.int64)
    parent_pos[by_depth] = np.maximum.accumulate(candidate) - lift
    # An only child: a first child whose next range at its depth (in pos order) is another first child, or none.
    next_is_first = np.ones(n, dtype=bool)
    same_depth = depth[by_depth][1:] == depth[by_depth][:-1]
    next_is_first[by_depth[:-1]] = ~same_depth | first_child[by_depth][1:]

    result = {
        "pos": np.empty(n, dtype=np.int32),
        "depth": np.empty(n, dtype=np.int32),
        "last_pos": np.empty(n, dtype=np.int32),
        "parent": np.empty(n, dtype=np.int32),
        "only_child": np.empty(n, dtype=bool),
    }
    result["pos"][order] = np.arange(1, n + 1)
    result["depth"][order] = depth
    result["last_pos"][order] = last_pos
    result["parent"][order] = np.where(parent_pos >= 0, order[np.maximum(parent_pos, 0)] + 1, 0)
    result["only_child"][order] = first_child & next_is_first
    return result


def _nest_rows(ts_ns: pa.ChunkedArray, end_ns: pa.ChunkedArray, event_idx: pa.ChunkedArray) -> pa.Array:
    """:func:`nest` over each row of the list columns (one row per thread), built as Arrow lists directly."""
    lists = [column.combine_chunks() for column in (ts_ns, end_ns, event_idx)]
    rows = [nest(*(column[row].values.to_numpy(zero_copy_only=False) for column in lists))
            for row in range(len(lists[0]))]
    offsets = pa.array(np.cumsum([0] + [len(row["pos"]) for row in rows]), type=pa.int32())
    children = [
        pa.ListArray.from_arrays(offsets, pa.array(np.concatenate([row[field.name] for row in rows] or [[]]),
                                                   type=field.type.value_type))
        for field in RESULT
    ]
    return pa.StructArray.from_arrays(children, fields=list(RESULT))


def register_functions(con: duckdb.DuckDBPyConnection) -> None:
    """Make ``op_tree_nest(ts_ns, end_ns, event_idx)`` (BIGINT lists, one thread's ranges) callable in ``con``,
    returning :func:`nest`'s lists as a struct."""
    try:
        con.remove_function(FUNCTION)
    except duckdb.InvalidInputException:
        pass  # not registered on this connection yet
    con.create_function(
        FUNCTION,
        _nest_rows,
        ["BIGINT[]", "BIGINT[]", "BIGINT[]"],
        "STRUCT(pos INTEGER[], depth INTEGER[], last_pos INTEGER[], parent INTEGER[], only_child BOOLEAN[])",
        type="arrow",
    )
