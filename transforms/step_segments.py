"""The elementary segments of a slab of time, as the DuckDB function ``tb_segments`` that
``sql/intermediate/int_tb_step_segments.sql`` calls once per slab of time (``int_tb_step_boundaries``) with the slab's
role boundaries as lists.

A window over the points of a slab sorts them with seven running sums packed into a HUGEINT; numpy sorts the
boundaries once and keeps one int64 running count per role.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transforms.sql_functions import replace_function, single_array

FUNCTION = "tb_segments"
# The memory a call holds per row of its input, at its peak (DuckDB's lists, their Arrow and numpy copies, the
# working arrays and the result): the runner hands a call as many rows as the functions' memory allows.
BYTES_PER_ROW = 400
NO_STEP = np.iinfo(np.int64).min  # step_start of a boundary that is no step start
ROLES = 7  # 0 Kernel, 1 Memcpy, 2 Memset, 3 Communication, 4 Runtime, 5 DataLoader, 6 CPU Exec; 7 Other is none
RESULT = pa.struct([
    ("seg_start_ns", pa.list_(pa.int64())),
    ("seg_end_ns", pa.list_(pa.int64())),
    ("step_start_ns", pa.list_(pa.int64())),
    ("top_role", pa.list_(pa.int32())),
    ("kernel_active", pa.list_(pa.bool_())),
    ("comm_active", pa.list_(pa.bool_())),
    ("cpu_active", pa.list_(pa.bool_())),
])


def segments(
    t: np.ndarray, role: np.ndarray, delta: np.ndarray, step_start: np.ndarray, next_t: int | None
) -> dict[str, pa.Array]:
    """One segment per distinct boundary time ``t`` of the slab, ending at the next one (the last at ``next_t``,
    the next slab's first time, or null). A boundary opens (+1) or closes (-1) a range of ``role`` (0-6; -1 for a
    step boundary, which opens nothing; a step start carries its own time in ``step_start``, other boundaries
    :data:`NO_STEP`). Inside a segment a role is active when its ranges opened so far outnumber those closed;
    ``step_start_ns`` is the latest step start so far (null before the first); ``top_role`` the first active role
    in priority order, 7 when none."""
    order = np.argsort(t)  # ties in any order: what follows sums or maximises per time
    t = t[order]
    first = np.ones(len(t), dtype=bool)
    first[1:] = t[1:] != t[:-1]
    point = np.cumsum(first) - 1  # the distinct time each boundary belongs to
    points = int(point[-1]) + 1 if len(t) else 0
    role, delta = role[order], delta[order]
    active = np.empty((points, ROLES), dtype=bool)
    for code in range(ROLES):  # one role at a time: a points x roles matrix of counts would be 8x the memory
        mine = role == code
        active[:, code] = np.cumsum(np.bincount(point[mine], weights=delta[mine], minlength=points)) > 0
    top_role = np.where(active.any(axis=1), np.argmax(active, axis=1), ROLES).astype(np.int32)

    latest = np.full(points, NO_STEP)
    starts = step_start[order]
    is_start = starts != NO_STEP
    np.maximum.at(latest, point[is_start], starts[is_start])
    latest = np.maximum.accumulate(latest)
    seg_start = t[first]
    seg_end = np.append(seg_start[1:], next_t if next_t is not None else 0)
    end_mask = np.zeros(points, dtype=bool)
    end_mask[-1:] = next_t is None
    return {
        "seg_start_ns": pa.array(seg_start),
        "seg_end_ns": pa.array(seg_end, mask=end_mask),
        "step_start_ns": pa.array(latest, mask=latest == NO_STEP),
        "top_role": pa.array(top_role),
        "kernel_active": pa.array(active[:, 0]),
        "comm_active": pa.array(active[:, 3]),
        "cpu_active": pa.array(active[:, 6]),
    }


def _segment_rows(
    t: pa.ChunkedArray,
    role: pa.ChunkedArray,
    delta: pa.ChunkedArray,
    step_start: pa.ChunkedArray,
    next_t: pa.ChunkedArray,
) -> pa.Array:
    """:func:`segments` over each row of the list columns (one row per slab), built as Arrow lists directly."""
    lists = [single_array(column) for column in (t, role, delta, step_start)]
    next_ts = next_t.to_pylist()
    rows = []
    for row in range(len(next_ts)):
        arrays = [column[row].values for column in lists]
        arrays[3] = pc.fill_null(arrays[3], NO_STEP)  # int64 throughout: NaN would round the times
        t_row, role_row, delta_row, start_row = (array.to_numpy() for array in arrays)
        rows.append(segments(t_row, role_row, delta_row, start_row, next_ts[row]))
    offsets = pa.array(np.cumsum([0] + [len(row["seg_start_ns"]) for row in rows]), type=pa.int32())
    children = [
        pa.ListArray.from_arrays(offsets, pa.concat_arrays([row[field.name] for row in rows])
                                 if rows else pa.array([], type=field.type.value_type))
        for field in RESULT
    ]
    return pa.StructArray.from_arrays(children, fields=list(RESULT))


def register_functions(con: duckdb.DuckDBPyConnection) -> None:
    """Make ``tb_segments(t, role, delta, step_start, next_t)`` (lists of one slab's boundaries; the next slab's
    first time) callable in ``con``, returning :func:`segments`' lists as a struct."""
    replace_function(
        con,
        FUNCTION,
        _segment_rows,
        ["BIGINT[]", "INTEGER[]", "INTEGER[]", "BIGINT[]", "BIGINT"],
        "STRUCT(seg_start_ns BIGINT[], seg_end_ns BIGINT[], step_start_ns BIGINT[], top_role INTEGER[], "
        "kernel_active BOOLEAN[], comm_active BOOLEAN[], cpu_active BOOLEAN[])",
        type="arrow",
        null_handling="special",  # the last slab has no next one
    )
