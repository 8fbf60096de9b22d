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

# Category codes of the mart's bound_by, in this order (the mart's `categories` CTE names them).
CATEGORY_COUNT = 5
FUNCTION = "critical_path_split"


def _segmented_cummax(values: np.ndarray, segment_id: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` that restarts where ``segment_id`` (non-decreasing) changes: each segment is
    lifted above all earlier ones, so one global running maximum never carries a value across a boundary."""
    low, high = int(values.min()), int(values.max())
    span = high - low + 1
    if int(segment_id[-1]) * span >= 2**62:
        raise ValueError("critical path: step too long for int64 segment offsets")
    offset = segment_id * span
    return np.maximum.accumulate(values - low + offset) - offset + low


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
    """:func:`step_split` over each row of the list columns (one row per step)."""
    columns = (node, lane, pos, chain_weight, chain_category, src, dst, weight, category)
    lists = [column.combine_chunks() for column in columns]
    out = []
    for row in range(len(lists[0])):
        arrays = [column[row].values.to_numpy(zero_copy_only=False) for column in lists]
        totals = step_split(*arrays) if len(arrays[0]) else None
        out.append(None if totals is None else totals.tolist())
    return pa.array(out, type=pa.list_(pa.int64()))


def register_functions(con: duckdb.DuckDBPyConnection) -> None:
    """Make ``critical_path_split(node, lane, pos, chain_weight, chain_category, src, dst, weight, category)``
    callable in ``con``: lists per step as in :func:`step_split`, returning the path's ns per category code (NULL
    on a cycle)."""
    try:
        con.remove_function(FUNCTION)
    except duckdb.InvalidInputException:
        pass  # not registered on this connection yet
    con.create_function(
        FUNCTION,
        _split_rows,
        ["BIGINT[]", "UBIGINT[]", "BIGINT[]", "BIGINT[]", "INTEGER[]", "BIGINT[]", "BIGINT[]", "BIGINT[]",
         "INTEGER[]"],
        "BIGINT[]",
        type="arrow",
    )
