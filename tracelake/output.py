"""Printing results: a table for people (human units, fitted to the terminal), or exact CSV / JSON for programs."""

from __future__ import annotations

import csv
import shutil
import sys
from typing import Any

import orjson
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from transforms.units import format_value, plural


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_GAP = 2
"""Characters between two columns of :func:`print_table`'s tables (padding), and at the line's start."""


def _cut_to_fit(columns: list[str], cells: list[list[str]], longest: list[int], one_line: tuple[str, ...],
                width: int) -> None:
    """Cut the cells of the ``one_line`` columns, in place, to the width the other columns leave them (12 at least),
    with an ellipsis."""
    others = sum(n for n, c in zip(longest, columns, strict=True) if c not in one_line)
    cut = [i for i, c in enumerate(columns) if c in one_line]
    room = max(12, (width - others - _GAP * len(columns) - 1) // len(cut))
    for i in cut:
        for cell in cells:
            if len(cell[i]) > room:
                cell[i] = cell[i][: room - 1] + "…"
        longest[i] = max([len(columns[i]), *(len(cell[i]) for cell in cells)])


def print_table(
    columns: list[str],
    rows: list[tuple[Any, ...]],
    *,
    title: str | None = None,
    footer: bool = True,
    units: list[str] | None = None,
    one_line: tuple[str, ...] = (),
) -> None:
    """Rows as a table fitted to the terminal's width; ``*_ns`` as µs/ms/s, ``*_bytes`` as KiB/MiB/GiB, ratios as %.

    ``units`` names, for each column, the column whose unit its values have (default: its own name). Short columns
    (numbers, names) are never cut: long text takes the width left, wrapping within its column, or cut to one line
    with an ellipsis for the columns in ``one_line``; numbers are right-aligned.
    """
    width = shutil.get_terminal_size((120, 24)).columns
    console = Console(file=sys.stdout, width=width, highlight=False, soft_wrap=False)
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False, collapse_padding=True)
    cells = [[format_value(c, v) for c, v in zip(units or columns, row, strict=True)] for row in rows]
    longest = [max([len(column), *(len(cell[i]) for cell in cells)]) for i, column in enumerate(columns)]
    if one_line:
        _cut_to_fit(columns, cells, longest, one_line, width)
    short = [n <= 32 or c in one_line for n, c in zip(longest, columns, strict=True)]  # the rest gives way
    # Short columns keep their whole width where the terminal has room for them and 12 characters of each long one.
    whole = sum(n if s else 12 for n, s in zip(longest, short, strict=True)) + _GAP * len(columns) <= width
    for i, column in enumerate(columns):
        numeric = any(_is_number(row[i]) for row in rows)
        table.add_column(column, justify="right" if numeric else "left", no_wrap=short[i],
                         min_width=longest[i] if whole and short[i] else None,
                         overflow="ellipsis" if short[i] else "fold")
    for cell in cells:
        table.add_row(*(Text(value) for value in cell))  # Text: brackets in names are not rich markup
    console.print(table)
    if footer:
        console.print(f"({plural(len(rows), 'row')})")


def write_result(columns: list[str], rows: list[tuple[Any, ...]], fmt: str, *, units: list[str] | None = None) -> None:
    """Print a result as a human table, CSV, or a JSON array of row objects; CSV and JSON keep exact values (ns).
    ``units``: for the table, each column's unit column (:func:`print_table`)."""
    out = sys.stdout
    if fmt == "json":
        records = [dict(zip(columns, row, strict=True)) for row in rows]
        out.write(orjson.dumps(records, default=str, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        print_table(columns, rows, units=units)
