"""tb_segments: one slab's role boundaries into segments, worked out by hand."""

from __future__ import annotations

import duckdb

from transforms.step_segments import register_functions


def test_a_slab_splits_at_every_boundary_time():
    con = duckdb.connect()
    register_functions(con)
    # A step starts at 1; a kernel runs [3, 5), a communication range [3, 12) (given out of order), a step boundary
    # at 9 changes no role. The last segment ends at the next slab's first time (none here, then 20).
    rows = con.sql("""
        select tb_segments(
            [5, 1, 3, 3, 9, 12]::bigint[], [0, -1, 0, 3, -1, 3]::integer[], [-1, 0, 1, 1, 0, -1]::integer[],
            [null, 1, null, null, null, null]::bigint[], next_t
        )
        from (values (null::bigint), (20)) as slabs (next_t)
    """).fetchall()
    assert rows[0][0] == {
        "seg_start_ns": [1, 3, 5, 9, 12],
        "seg_end_ns": [3, 5, 9, 12, None],
        "step_start_ns": [1, 1, 1, 1, 1],
        "top_role": [7, 0, 3, 3, 7],
        "kernel_active": [False, True, False, False, False],
        "comm_active": [False, True, True, True, False],
        "cpu_active": [False, False, False, False, False],
    }
    assert rows[1][0]["seg_end_ns"] == [3, 5, 9, 12, 20]
