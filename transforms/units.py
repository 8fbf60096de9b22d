"""Human-readable units for the lake's columns, chosen by the column-name suffix (``*_ns``, ``*_bytes``, ``*_ratio``).

Tables keep exact integers (ns, bytes); these are for display only: reports, charts and ``--format table``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

# Columns holding a moment (absolute Unix ns), not a duration, though named ``*_ns``.
_TIMESTAMPS = ("ts_ns", "start_ns", "end_ns", "started_ns", "base_time_ns")
_TIMESTAMP_SUFFIXES = ("_ts_ns", "_start_ns", "_end_ns")
_SUFFIX_UNITS = (("_ns", "ns"), ("_bytes", "bytes"), ("_ratio", "ratio 0-1"), ("_gbps", "GB/s"), ("_pct", "%"),
                 ("_count", "count"))
_DURATIONS = (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0))
_SIZES = (("GiB", float(1 << 30)), ("MiB", float(1 << 20)), ("KiB", float(1 << 10)), ("B", 1.0))
# A timestamp column holds absolute Unix ns; anything after 2001 in ns is far above any duration a trace holds.
_UNIX_NS_FLOOR = 10**18


def is_timestamp(column: str) -> bool:
    """Whether ``column`` holds a moment (Unix ns), by the lake's naming rules."""
    return column in _TIMESTAMPS or column.endswith(_TIMESTAMP_SUFFIXES)


def is_duration(column: str) -> bool:
    """Whether ``column`` holds a duration in ns (never negative), by the lake's naming rules."""
    return column.endswith("_ns") and not is_timestamp(column)


def is_ratio(column: str) -> bool:
    """Whether ``column`` holds a ratio in [0, 1]."""
    return column.endswith("_ratio")


def unit_of(column: str) -> str:
    """The unit a column's name promises."""
    if is_timestamp(column):
        return "Unix ns"
    return next((unit for suffix, unit in _SUFFIX_UNITS if column.endswith(suffix)), "")


def duration_unit(max_ns: float) -> tuple[str, float]:
    """The unit (and ns per unit) that shows ``max_ns`` with 1-3 digits before the point: one unit per chart axis."""
    return next(((u, s) for u, s in _DURATIONS if abs(max_ns) >= s), _DURATIONS[-1])


def size_unit(max_bytes: float) -> tuple[str, float]:
    """The binary unit (and bytes per unit) for an axis whose largest value is ``max_bytes``."""
    return next(((u, s) for u, s in _SIZES if abs(max_bytes) >= s), _SIZES[-1])


def format_ns(value: float) -> str:
    """Nanoseconds as a short human duration: ``1.25 ms``, ``812 ns``."""
    unit, scale = duration_unit(value)
    return f"{value:.0f} ns" if unit == "ns" else f"{value / scale:.3g} {unit}"


def format_bytes(value: float) -> str:
    """Bytes as a short binary size: ``1.5 GiB``, ``312 B``."""
    unit, scale = size_unit(value)
    return f"{value:.0f} B" if unit == "B" else f"{value / scale:.3g} {unit}"


def format_ratio(value: float) -> str:
    """A ratio in [0, 1] as a percentage: ``37.5 %``; a share under 0.01 % as ``< 0.01 %``, never in e-notation."""
    percent = 100 * value
    if 0 < abs(percent) < 0.01:
        return "< 0.01 %" if percent > 0 else "> -0.01 %"
    return f"{percent:.3g} %" if abs(percent) < 1000 else f"{percent:,.0f} %"


def format_change(ratio: float | None) -> str:
    """A signed relative change as a percentage: ``+27.4 %``, ``-3.0 %``; ``—`` for none."""
    return "—" if ratio is None else f"{100 * ratio:+.1f} %".replace("-0.0 %", "+0.0 %")


def format_timestamp_ns(value: int) -> str:
    """Absolute Unix ns as UTC date and time to the millisecond."""
    moment = dt.datetime.fromtimestamp(value / 1e9, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def format_number(value: float) -> str:
    """A number without a unit, in 4 significant digits and never in e-notation above 1: ``0.1235``, ``1,353``,
    ``69,440``."""
    if abs(value) >= 1e4:
        return f"{value:,.0f}"
    return f"{value:.4g}" if value == 0 or abs(value) >= 1e-4 else f"{value:.2e}"


def format_value(column: str, value: Any) -> str:
    """One cell for people: units by the column's suffix, ``—`` for a missing value, timestamps as dates."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    if isinstance(value, int | float):
        if column.endswith("_ns"):
            return format_timestamp_ns(int(value)) if value >= _UNIX_NS_FLOOR else format_ns(value)
        if column.endswith("_bytes"):
            return format_bytes(value)
        if column.endswith("_ratio"):
            return format_ratio(value)
        if column.endswith("_pct"):  # a change (change_pct) is signed: +4,663.0 %
            return f"{value:{'+' if 'change' in column else ''},.1f} %"
        if isinstance(value, float):
            return format_number(value)
        return f"{value:,}"
    return str(value)


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 run``, ``3 runs``, ``2 analyses`` (with ``plural_form``)."""
    return f"{count:,} {noun if count == 1 else (plural_form or noun + 's')}"
