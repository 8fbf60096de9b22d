"""The host op trees with each node's figures, as the DuckDB function ``op_tree`` that
``sql/intermediate/int_op_nodes.sql`` calls once per piece of a thread (``int_op_tree_ranges``: its ranges
between two steps that no range crosses) with the piece's ranges as a list.

In SQL the links took five window passes over the ranges and their start and end edges, each sorting every row
again, and the subtree sums a window framed per row: 2.3 s of the 6.4 s of CPU the models of a 234 MB trace took,
first on their critical path. numpy sorts a thread's ranges once and its ends once, finds depth and subtree by
binary search and subtree sums as differences of running sums; with the join of the names, the model takes 0.7 s.

Definitions (the rows a thread's ranges become):
- ``pos``: 1-based position in (start, end descending, event_idx) order; a missing time sorts after every time.
- ``depth``: ranges of positive length open at the range's start, in one sweep over starts and ends ordered by
  (time, ends before starts, pos); zero-length ranges, and ranges without a start time, open nothing.
- ``last_pos``: the last position starting before the range ends (its subtree is pos .. last_pos).
- parent: the nearest range before it (in pos) at depth - 1. Depth rises by at most one per position, so the range
  right after its parent is a first child; every later range at that depth shares the parent of the last first
  child before it, which is how the parent is carried: forward, per depth.
- ``merged_into_parent``: an only child (a first child whose next range at its depth is a first child too, or
  none) of a parent with its name, in the torch tree, or between two operators (the child no ``ProfilerStep#``) in
  tb_plugin's: both anchors fold it into its parent (torch ``EventList._remove_dup_nodes``, tb_plugin
  ``remove_dup_nodes``).
- ``children_ns``: the time of its direct children inside it (an async op can end after the op that started it);
  ``device_total_ns`` and ``kernel_count``: the subtree's sums of what each node launched itself (its own
  ``self_device_ns`` and kernels).
"""

from __future__ import annotations

import itertools

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transforms.sql_functions import replace_function, single_array

FUNCTION = "op_tree"
# The memory a call holds per row of its input, at its peak (DuckDB's lists, their Arrow and numpy copies, the
# working arrays and the result): the runner hands a call as many rows as the functions' memory allows.
BYTES_PER_ROW = 400
# The fields of each range handed in (SQL struct order), and of each linked range handed back.
RANGE = (
    "STRUCT(event_idx BIGINT, ts_ns BIGINT, dur_ns BIGINT, name_key UBIGINT, is_operator BOOLEAN, "
    "is_plain_operator BOOLEAN, torch_tree BOOLEAN, device_ns BIGINT, kernel_count BIGINT)"
)
LINKED = pa.struct([
    ("event_idx", pa.int64()),
    ("depth", pa.int32()),
    ("pos", pa.int32()),
    ("parent_event_idx", pa.int64()),
    ("last_pos", pa.int32()),
    ("merged_into_parent", pa.bool_()),
    ("children_ns", pa.int64()),
    ("self_device_ns", pa.int64()),
    ("device_total_ns", pa.int64()),
    ("kernel_count", pa.int64()),
])
_SQL_TYPES = {pa.int64(): "BIGINT", pa.int32(): "INTEGER", pa.bool_(): "BOOLEAN"}
_LAST = np.iinfo(np.int64).max  # the sort key of a missing time: after every time, as SQL's NULLS LAST
_LINK_PARTS = ("order", "pos", "depth", "last_pos", "parent", "only_child")


def link(
    event_idx: np.ndarray, start: np.ndarray, end: np.ndarray, has_length: np.ndarray, end_order: np.ndarray
) -> dict[str, np.ndarray]:
    """Link one thread's ranges into its tree; see the module's definitions. ``start`` holds a missing time as
    :data:`_LAST`; ``end`` is read only where ``has_length``; ``end_order`` sorts ends descending (the negated end,
    missing ones last).

    Returns, in pos order: ``order`` (the input row of each range), ``pos``, ``depth``, ``last_pos``, ``parent``
    (the parent's index in this order, -1 for none) and ``only_child``.
    """
    order = np.lexsort((event_idx, end_order, start))
    start, end, has_length = start[order], end[order], has_length[order]
    n = len(order)
    pos = np.arange(1, n + 1)
    # The sweep meets ends before starts at one instant: a range's depth counts the ranges of positive length
    # opened before it, less those closed by its start; its subtree, the ranges starting before its end.
    closed = np.searchsorted(np.sort(end[has_length]), start, side="right")
    depth = np.cumsum(has_length) - has_length - closed
    last_pos = np.where(has_length, np.maximum(np.searchsorted(start, end), pos), pos)

    # A first child directly follows its parent; parents carry forward per depth, in pos order.
    first_child = np.zeros(n, dtype=bool)
    first_child[1:] = depth[:-1] == depth[1:] - 1
    by_depth = np.argsort(depth, kind="stable")
    child = first_child[by_depth]
    rank = np.arange(n)
    new_depth = np.ones(n, dtype=bool)
    new_depth[1:] = depth[by_depth][1:] != depth[by_depth][:-1]
    depth_start = np.maximum.accumulate(np.where(new_depth, rank, 0))
    latest_first_child = np.maximum.accumulate(np.where(child, rank, -1))
    carried = latest_first_child >= depth_start
    parent = np.full(n, -1)
    parent[by_depth[carried]] = by_depth[latest_first_child[carried]] - 1
    next_at_depth = np.append(~new_depth[1:], False)
    only_child = np.empty(n, dtype=bool)
    only_child[by_depth] = child & np.where(next_at_depth, np.append(child[1:], False), True)
    return {"order": order, "pos": pos, "depth": depth, "last_pos": last_pos, "parent": parent,
            "only_child": only_child}


def _times(rows: pa.StructArray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each range's start and end (0 and ``dur_ns`` where missing) and whether they are missing."""
    ts, dur = rows.field("ts_ns"), rows.field("dur_ns")
    ts_missing = ts.is_null().to_numpy(zero_copy_only=False)
    end_missing = ts_missing | dur.is_null().to_numpy(zero_copy_only=False)
    start = ts.fill_null(0).to_numpy()
    return start, start + dur.fill_null(0).to_numpy(), ts_missing, end_missing


def _link_threads(rows: pa.StructArray, bounds: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`link` of each thread's rows (``rows[bounds[i]:bounds[i + 1]]``), concatenated, with ``order`` and
    ``parent`` indexing the rows of the call, and ``pos``, ``depth`` and ``last_pos`` as int32. Its inputs are
    freed on return, before the result's arrays are made."""
    ts, end, ts_missing, end_missing = _times(rows)
    start, end_order = np.where(ts_missing, _LAST, ts), np.where(end_missing, _LAST, -end)
    has_length = pc.fill_null(pc.greater(rows.field("dur_ns"), 0), False).to_numpy(zero_copy_only=False) & ~ts_missing
    event_idx = rows.field("event_idx").to_numpy(zero_copy_only=False)
    parts: dict[str, list[np.ndarray]] = {name: [] for name in _LINK_PARTS}  # DuckDB calls with one row or more
    for first, stop in itertools.pairwise(bounds):
        thread = slice(first, stop)
        links = link(event_idx[thread], start[thread], end[thread], has_length[thread], end_order[thread])
        links["order"] += first
        links["parent"] = np.where(links["parent"] >= 0, links["parent"] + first, -1)
        for name in ("pos", "depth", "last_pos"):
            links[name] = links[name].astype(np.int32)
        for name in _LINK_PARTS:
            parts[name].append(links[name])
    return {name: np.concatenate(parts.pop(name)) for name in _LINK_PARTS}


def _merges_and_children(
    rows: pa.StructArray, order: np.ndarray, parent: np.ndarray, only_child: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``merged_into_parent`` and ``children_ns`` of each linked range (in the result's order, ``order`` giving each
    one's input row and ``parent`` its parent's place in the result, -1 for none)."""
    def ordered(name: str) -> np.ndarray:
        column: np.ndarray = rows.field(name).to_numpy(zero_copy_only=False)[order]
        return column

    has_parent = parent >= 0
    child, of = np.flatnonzero(has_parent), parent[has_parent]
    name_key, torch_tree = ordered("name_key"), ordered("torch_tree")
    is_operator, is_plain_operator = ordered("is_operator"), ordered("is_plain_operator")
    merged = np.zeros(len(order), dtype=bool)
    merged[child] = (
        only_child[child]
        & (name_key[of] == name_key[child])
        & (torch_tree[child] | (is_plain_operator[child] & is_operator[of]))
    )
    del name_key, torch_tree, is_operator, is_plain_operator
    ts, end, _, end_missing = _times(rows)
    ts, end, end_missing = ts[order], end[order], end_missing[order]
    # A parent has length, so its end is known; a child without an end counts up to its parent's.
    inside = np.maximum(0, np.where(end_missing[child], end[of], np.minimum(end[child], end[of])) - ts[child])
    children_ns = np.zeros(len(order), dtype=np.int64)
    np.add.at(children_ns, of, inside)
    return merged, children_ns


def _linked_rows(ranges: pa.ChunkedArray) -> pa.Array:
    """:func:`link` over each row of ``ranges`` (one list of :data:`RANGE` per thread), as one list of
    :data:`LINKED` per row, with each node's figures. Each step frees what the next does not read: the function
    holds every thread of the call at once."""
    lists = single_array(ranges)
    rows = lists.flatten()
    bounds = np.concatenate(([0], np.cumsum(pc.list_value_length(lists).fill_null(0).to_numpy())))
    links = _link_threads(rows, bounds)
    order, parent = links.pop("order"), links.pop("parent")
    merged, children_ns = _merges_and_children(rows, order, parent, links.pop("only_child"))
    event_idx, device_ns, kernel_count = (
        rows.field(name).to_numpy(zero_copy_only=False)[order] for name in ("event_idx", "device_ns", "kernel_count"))
    del order
    # Subtree sums: a subtree is the rows of the result from its node's to last_pos's, a difference of running sums.
    first = np.arange(len(event_idx))
    last = first + (links["last_pos"] - links["pos"])
    device_total, kernel_total = _range_sums(device_ns, first, last), _range_sums(kernel_count, first, last)
    del first, last
    has_parent = parent >= 0
    linked = pa.StructArray.from_arrays(
        [
            pa.array(event_idx),
            pa.array(links.pop("depth")),
            pa.array(links.pop("pos")),
            pa.array(np.where(has_parent, event_idx[parent], 0), mask=~has_parent),
            pa.array(links.pop("last_pos")),
            pa.array(merged),
            pa.array(children_ns),
            pa.array(device_ns),
            pa.array(device_total),
            pa.array(kernel_total),
        ],
        fields=list(LINKED),
    )
    return pa.ListArray.from_arrays(pa.array(bounds, type=pa.int32()), linked)


def _range_sums(values: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """The sum of ``values[first[i]:last[i] + 1]`` for each i."""
    running = np.concatenate(([0], np.cumsum(values)))
    sums: np.ndarray = running[last + 1] - running[first]
    return sums


def register_functions(con: duckdb.DuckDBPyConnection) -> None:
    """Make ``op_tree(ranges)`` (a list of one thread's :data:`RANGE` structs) callable in ``con``, returning the
    thread's ranges linked into its tree as a list of :data:`LINKED` structs in pos order."""
    linked = ", ".join(f"{f.name} {_SQL_TYPES[f.type]}" for f in LINKED)
    replace_function(con, FUNCTION, _linked_rows, [f"{RANGE}[]"], f"STRUCT({linked})[]", type="arrow")
