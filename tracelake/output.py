"""Printing results: a table for people (human units, fitted to the terminal), or exact CSV / JSON for programs."""

from __future__ import annotations

import csv
import shutil
import sys
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table, box
from rich.text import Text

from transforms.units import format_value, plural


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def print_table(columns: list[str], rows: list[tuple], *, title: str | None = None, footer: bool = True) -> None:
    """Rows as a table fitted to the terminal's width; ``*_ns`` as µs/ms/s, ``*_bytes`` as KiB/MiB/GiB, ratios as %.

    Long text wraps within its column instead of widening the table; numbers are right-aligned.
    """
    width = shutil.get_terminal_size((120, 24)).columns
    console = Console(file=sys.stdout, width=width, highlight=False, soft_wrap=False)
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False, collapse_padding=True)
    cells = [[format_value(c, v) for c, v in zip(columns, row, strict=True)] for row in rows]
    for i, column in enumerate(columns):
        numeric = any(_is_number(row[i]) for row in rows)
        short = max((len(cell[i]) for cell in cells), default=0) <= 32  # only long text (names, paths) wraps
        table.add_column(column, justify="right" if numeric else "left", no_wrap=short,
                         overflow="ellipsis" if short else "fold")
    for cell in cells:
        table.add_row(*(Text(value) for value in cell))  # Text: brackets in names are not rich markup
    console.print(table)
    if footer:
        console.print(f"({plural(len(rows), 'row')})")


def write_result(columns: list[str], rows: list[tuple], fmt: str) -> None:
    """Print a result as a human table, CSV, or a JSON array of row objects; CSV and JSON keep exact values (ns)."""
    out = sys.stdout
    if fmt == "json":
        records = [dict(zip(columns, row, strict=True)) for row in rows]
        out.write(orjson.dumps(records, default=str, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        print_table(columns, rows)
