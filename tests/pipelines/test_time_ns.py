"""time_ns equals DuckDB's general decimal cast (exact µs text → ns, NULL from 2^62 ns) on every path it takes."""

import random

import duckdb

from pipelines.schema import time_ns

GENERAL = "try_cast(try_cast(c as DECIMAL(22,3)) * 2000 as bigint) // 2"
EDGES = [
    "0", "0.0005", "0.0004999", "5.", ".5", "-1.5", "-0.0005", "-123456789012345.6", "1e3", "1.5e2", "00012.5",
    "abc", "", "1.2.3", "  12",
    "1683564901548726",  # absolute epoch µs (16 digits)
    "1712195495519689.047",  # displayTimeUnit "ns": µs with ns decimals
    "4463578071416.926",  # relative µs, the common case
    "4611686018427386.9999", "4611686018427387", "4611686018427387.903", "4611686018427387.904", "4611686018427388",
    "6095981265131609.9",  # 18 characters past the 2^62 ns bound: NULL, not 6095981265131609900
    "9999999999999999", "99999999999999999",
]


def _values(count: int) -> list[str]:
    rnd = random.Random(7)
    values = list(EDGES)
    for _ in range(count):
        integer = str(rnd.randrange(0, 10 ** rnd.randrange(1, 17)))
        decimals = "".join(rnd.choice("0123456789") for _ in range(rnd.randrange(0, 7)))
        values.append(f"{integer}.{decimals}" if rnd.random() < 0.6 else integer)
    return values


def test_every_path_equals_the_general_cast() -> None:
    con = duckdb.connect()
    con.execute("create table t as select unnest($values) as c", {"values": _values(50_000)})
    differing = con.execute(
        f"select c, {GENERAL}, {time_ns('c')} from t where ({GENERAL}) is distinct from ({time_ns('c')})"
    ).fetchall()
    assert differing == []
    assert con.execute(f"select {time_ns('c')} from t where c = '6095981265131609.9'").fetchone() == (None,)
    assert con.execute(f"select {time_ns('c')} from t where c = '1712195495519689.047'").fetchone() == (
        1712195495519689047,
    )
