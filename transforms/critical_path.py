"""The longest path through one step's event graph, as the DuckDB function ``critical_path_split`` that the
``critical_path`` mart calls (``sql/marts/critical_path.sql`` builds the graph; this module only walks it).

The graph is a set of chains (a CPU thread's op boundaries in call order; a GPU stream's kernel starts and ends in
time order) joined by cross edges (kernel launches, CPU-GPU and GPU-GPU syncs). Within a chain the longest path to
a node is a prefix maximum, so instead of visiting ~2 nodes per event in Python the solver relaxes every cross edge
at once and recomputes all chains with numpy, round after round, until nothing changes: as many rounds as the path
has cross edges, plus one. A Python loop runs only over the cross edges on the path, to split it by category.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from transforms.sql_functions import replace_function, single_array

# Category codes of the mart's bound_by, in this order (the mart's `categories` CTE names them).
CATEGORY_COUNT = 5
FUNCTION = "critical_path_split"
# The memory a call holds per row of its input, at its peak (DuckDB's lists, their Arrow and numpy copies, the
# working arrays and the result): the runner hands a call as many rows as the functions' memory allows.
BYTES_PER_ROW = 400


def _segmented_cummax(values: np.ndarray, segment_id: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` that restarts where ``segment_id`` (non-decreasing) changes: each segment is
    lifted above all earlier ones, so one global running maximum never carries a value across a boundary."""
    low, high = int(values.min()), int(values.max())
    span = high - low + 1
    if int(segment_id[-1]) * span >= 2**62:
        raise ValueError("critical path: step too long for int64 segment offsets")
    offset = segment_id * span
    maxima: np.ndarray = np.maximum.accumulate(values - low + offset) - offset + low
    return maxima


def longest_path_split(
    chain_weight: np.ndarray,
    chain_category: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    category: np.ndarray,
) -> np.ndarray | None:
    """Time per category along the longest path of a DAG given as chains plus cross edges.

    Nodes are numbered in chain order: node i has an edge from node i-1 of weight ``chain_weight[i]`` and category
    ``chain_category[i]``, or starts a chain (a segment) where ``chain_weight[i]`` < 0. Cross edge k goes from
    ``src[k]`` to ``dst[k]``. Weights are non-negative. A path may start at any node. Returns the path's weight
    per category code (length :data:`CATEGORY_COUNT`), or None when the edges form a cycle (no longest path).
    Ties go to the chain: a path stays on its thread or stream rather than jump in by an equally long edge.
    """
    n = len(chain_weight)
    starts = chain_weight < 0
    starts[0] = True
    step_weight = np.where(starts, 0, chain_weight)
    along = np.cumsum(step_weight)  # differences within a segment are chain path lengths
    segment_id = np.cumsum(starts) - 1
    best = np.zeros(n, dtype=np.int64)
    for _ in range(len(src) + 2):  # a simple path crosses each cross edge at most once
        entry = np.zeros(n, dtype=np.int64)
        np.maximum.at(entry, dst, best[src] + weight)
        running = _segmented_cummax(entry - along, segment_id)
        new_best = running + along
        if np.array_equal(new_best, best):
            break
        best = new_best
    else:
        return None
    # Where the path entered each node's segment: the first position reaching the segment's running maximum.
    entered = starts.copy()
    entered[1:] |= (entry - along)[1:] > running[:-1]
    entry_point = np.maximum.accumulate(np.where(entered, np.arange(n), 0))
    by_category = np.zeros((n, CATEGORY_COUNT), dtype=np.int64)
    by_category[np.arange(n), chain_category] = step_weight
    by_category = np.cumsum(by_category, axis=0)
    # The longest cross edge into each node.
    reach = best[src] + weight
    order = np.lexsort((-reach, dst))
    first = np.ones(len(order), dtype=bool)
    first[1:] = dst[order][1:] != dst[order][:-1]
    into = np.full(n, -1)
    into[dst[order][first]] = order[first]

    totals = np.zeros(CATEGORY_COUNT, dtype=np.int64)
    node = int(np.argmax(best))
    while True:
        enter = int(entry_point[node])
        totals += by_category[node] - by_category[enter]
        edge = int(into[enter])
        if best[enter] == 0 or edge < 0 or reach[edge] != best[enter]:
            return totals
        totals[category[edge]] += weight[edge]
        node = int(src[edge])


def _call_order(lane: np.ndarray, at: np.ndarray, is_start: np.ndarray, dur: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The permutation that sorts boundaries by lane, time, ends before starts, then the longer range opening first
    and closing last, then trace order. Sorting on two keys and then only the (rare) runs of equal lane, time and
    kind on the last two costs a fraction of one sort on all five."""
    key = (at - at.min()) * 2 + is_start
    order = np.lexsort((key, lane))
    same = (key[order][1:] == key[order][:-1]) & (lane[order][1:] == lane[order][:-1])
    if same.any():
        tied = np.zeros(len(order), dtype=bool)
        tied[1:] |= same
        tied[:-1] |= same
        at_tie = np.flatnonzero(tied)
        run = np.cumsum(np.concatenate([[True], ~same]))[at_tie]
        members = order[at_tie]
        starts = is_start[members]
        order[at_tie] = members[np.lexsort((np.where(starts, idx[members], -idx[members]),
                                            np.where(starts, -dur[members], dur[members]), run))]
    return order


def host_chains(
    lane: np.ndarray,
    event_idx: np.ndarray,
    ts_ns: np.ndarray,
    end_ns: np.ndarray,
    blocking: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The host threads' chains: each event's start and end as nodes (key ``2 * event_idx + is_start``) in call
    order on its lane (thread), with the chain edge into each. Returns (node, lane, pos, chain_weight).

    Call order is by time; at one instant ends come before starts, the longer range opens first and closes last
    (then trace order). An edge weighs the time since the previous boundary, except between top-level ops (a
    dependency: 0) and into the end of a blocking call (it waits for the GPU: 0); a thread's first node starts its
    chain (-1).
    """
    n = len(lane)
    is_start = np.repeat(np.array([True, False]), n)
    at = np.concatenate([ts_ns, end_ns])
    idx = np.concatenate([event_idx, event_idx])
    lanes = np.concatenate([lane, lane])
    order = _call_order(lanes, at, is_start, np.tile(end_ns - ts_ns, 2), idx)
    is_start, at, idx, lanes = is_start[order], at[order], idx[order], lanes[order]
    lane_starts = np.ones(2 * n, dtype=bool)
    lane_starts[1:] = lanes[1:] != lanes[:-1]
    # Every event opens and closes on its own lane, so the running count of open events never crosses lanes.
    change = np.where(is_start, 1, -1)
    open_before = np.cumsum(change) - change
    previous_ns = np.empty_like(at)
    previous_ns[0] = 0
    previous_ns[1:] = at[:-1]
    waits = ~is_start & np.tile(blocking, 2)[order]
    chain_weight = np.where(lane_starts, -1, np.where((open_before == 0) | waits, 0, at - previous_ns))
    pos = np.arange(2 * n)  # increasing along each lane, which is all a position needs
    return 2 * idx + is_start, lanes, pos, chain_weight


def step_split(
    node: np.ndarray,
    lane: np.ndarray,
    pos: np.ndarray,
    chain_weight: np.ndarray,
    chain_category: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    category: np.ndarray,
) -> np.ndarray | None:
    """:func:`longest_path_split` of nodes given in any order: node keys (unique), their lane (chain) and position
    in it; cross edges name their ends by node key."""
    order = np.lexsort((pos, lane))
    keys = node[order]
    by_key = np.argsort(keys)
    sorted_keys = keys[by_key]
    ends = by_key[np.searchsorted(sorted_keys, np.concatenate([src, dst]))]
    return longest_path_split(chain_weight[order], chain_category[order], ends[: len(src)], ends[len(src):],
                              weight, category)


def _split_rows(
    host_lane: pa.ChunkedArray,
    host_event_idx: pa.ChunkedArray,
    host_ts_ns: pa.ChunkedArray,
    host_end_ns: pa.ChunkedArray,
    host_blocking: pa.ChunkedArray,
    node: pa.ChunkedArray,
    lane: pa.ChunkedArray,
    pos: pa.ChunkedArray,
    chain_weight: pa.ChunkedArray,
    chain_category: pa.ChunkedArray,
    src: pa.ChunkedArray,
    dst: pa.ChunkedArray,
    weight: pa.ChunkedArray,
    category: pa.ChunkedArray,
) -> pa.Array:
    """One row per step: the host events (lane, event_idx, ts_ns, end_ns, blocking), the device nodes (node, lane,
    pos, chain_weight, chain_category) and the cross edges (src, dst, weight, category), as lists; :func:`step_split`
    of the host chains (category cpu) and the device nodes."""
    columns = (host_lane, host_event_idx, host_ts_ns, host_end_ns, host_blocking, node, lane, pos, chain_weight,
               chain_category, src, dst, weight, category)
    lists = [single_array(column) for column in columns]
    out: list[list[int] | None] = []
    for row in range(len(lists[0])):
        arrays = [column[row].values.to_numpy(zero_copy_only=False) for column in lists]
        host, device, edges = arrays[:5], arrays[5:10], arrays[10:]
        if not len(host[0]) and not len(device[0]):
            out.append(None)
            continue
        node, lane, pos, chain_weight = host_chains(*host)
        nodes = [np.concatenate([a, b]) for a, b in zip(
            (node, lane, pos, chain_weight, np.zeros(len(node), dtype=np.int32)), device, strict=True)]
        totals = step_split(*nodes, *edges)
        out.append(None if totals is None else totals.tolist())
    return pa.array(out, type=pa.list_(pa.int64()))


def register_functions(con: duckdb.DuckDBPyConnection) -> None:
    """Make ``critical_path_split(host lane, event_idx, ts_ns, end_ns, blocking, device node, lane, pos,
    chain_weight, chain_category, cross src, dst, weight, category)`` callable in ``con``: lists per step as in
    :func:`_split_rows`, returning the path's ns per category code (NULL on a cycle)."""
    replace_function(
        con,
        FUNCTION,
        _split_rows,
        ["UBIGINT[]", "BIGINT[]", "BIGINT[]", "BIGINT[]", "BOOLEAN[]",
         "BIGINT[]", "UBIGINT[]", "BIGINT[]", "BIGINT[]", "INTEGER[]",
         "BIGINT[]", "BIGINT[]", "BIGINT[]", "INTEGER[]"],
        "BIGINT[]",
        type="arrow",
    )
