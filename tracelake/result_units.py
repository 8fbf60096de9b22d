"""The unit of each column of a ``tracelake sql`` result, for ``--format table``: a column named by the lake's rules
(``*_ns``, ``*_bytes``, ``*_ratio``) keeps its own; an alias or an expression (``avg(dur_ns) as a``) takes the unit of
the column it is computed from, read from DuckDB's parse tree of the query (``json_serialize_sql``).

Only computations that keep a unit pass it on: aggregates such as avg, sum, min, max and quantiles, rounding, casts,
and sums or differences of columns of one unit (``end_ns - start_ns`` is a duration in ns). A product or quotient
(``sum(dur_ns) / 1e6 as ms``) has no known unit and is printed as the number it is.
"""

from __future__ import annotations

import functools
from typing import Any

import duckdb
import orjson

from pipelines.rows import sql_path
from transforms.units import unit_of

_KEEP_UNIT = frozenset({
    "avg", "mean", "sum", "fsum", "sumkahan", "kahan_sum", "min", "max", "median", "mode", "quantile",
    "quantile_cont", "quantile_disc", "percentile_cont", "percentile_disc", "first", "last", "any_value",
    "arbitrary", "arg_min", "arg_max", "min_by", "max_by", "stddev", "stddev_pop", "stddev_samp", "mad", "abs",
    "round", "floor", "ceil", "ceiling", "trunc", "coalesce", "greatest", "least", "ifnull", "nullif", "+", "-",
    "lag", "lead", "first_value", "last_value", "nth_value",
})
"""Functions whose result has the unit of their (first) argument."""
_FIRST_ARGUMENT_ONLY = frozenset({"arg_min", "arg_max", "min_by", "max_by", "quantile", "quantile_cont",
                                  "quantile_disc", "round", "trunc", "nullif", "lag", "lead", "nth_value"})
"""Of these, only the first argument carries the unit (the others are a key, a fraction, digits, an offset)."""
_MAX_DEPTH = 32


def _has_unit(name: str) -> bool:
    return bool(unit_of(name))


def _common(units: list[str | None]) -> str | None:
    """The unit column of values computed from columns of ``units``: one of them where all have the same unit (a
    moment and a duration both count in ns: ``end_ns - start_ns`` is a duration), else None."""
    named = [u for u in units if u is not None]
    if not named or len(named) < len(units):
        return None
    return named[0] if len({"ns" if unit_of(u) == "Unix ns" else unit_of(u) for u in named}) == 1 else None


@functools.cache
def _parser() -> duckdb.DuckDBPyConnection:
    return duckdb.connect()


def _select_nodes(node: Any) -> list[dict[str, Any]]:
    """Every SELECT node anywhere in the parse tree (the query, its CTEs, its subqueries)."""
    found = []
    if isinstance(node, dict):
        if node.get("type") == "SELECT_NODE":
            found.append(node)
        for value in node.values():
            found.extend(_select_nodes(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_select_nodes(value))
    return found


def _top_select(node: dict[str, Any]) -> dict[str, Any] | None:
    """The SELECT node whose columns the result has (the left side of a UNION)."""
    while node.get("type") == "SET_OPERATION_NODE":
        node = node["left"]
    return node if node.get("type") == "SELECT_NODE" else None


class _Resolver:
    """Units of expressions, with the aliases of every SELECT of the query to follow a column to where it is made."""

    def __init__(self, tree: dict[str, Any]) -> None:
        self.aliases: dict[str, dict[str, Any]] = {}
        for node in _select_nodes(tree):
            for expression in node.get("select_list", []):
                if expression.get("alias"):
                    self.aliases.setdefault(expression["alias"], expression)

    def unit_column(self, expression: dict[str, Any], depth: int = 0) -> str | None:
        """A column name whose suffix gives ``expression``'s unit, or None when it has none that is known."""
        if depth > _MAX_DEPTH:
            return None
        kind = expression.get("class")
        if kind == "COLUMN_REF":
            name = str(expression["column_names"][-1])
            if _has_unit(name):
                return name
            made = self.aliases.get(name)
            return self.unit_column(made, depth + 1) if made is not None and made is not expression else None
        if kind == "CAST":
            return self.unit_column(expression["child"], depth + 1)
        if kind in ("FUNCTION", "WINDOW") and expression.get("function_name", "").lower() in _KEEP_UNIT:
            name = expression["function_name"].lower()
            children = expression.get("children", [])
            if name in _FIRST_ARGUMENT_ONLY:
                children = children[:1]
            return _common([self.unit_column(c, depth + 1) for c in children if c.get("class") != "CONSTANT"])
        if kind == "CASE":
            branches = [check["then_expr"] for check in expression.get("case_checks", [])]
            branches.append(expression["else_expr"])
            return _common([self.unit_column(b, depth + 1) for b in branches
                            if not (b.get("class") == "CONSTANT" and b["value"].get("is_null"))])
        return None


def unit_columns(query: str, columns: list[str]) -> list[str]:
    """For each column of ``query``'s result (named ``columns``), the name to format its values by: its own where it
    names a unit, else the column it is computed from, else its own (a number without a known unit)."""
    if all(_has_unit(c) for c in columns):
        return columns
    try:
        # a literal: DuckDB's Python client imports pandas to bind any parameter (0.3 s of every tracelake sql)
        (text,) = _parser().execute(f"select json_serialize_sql({sql_path(query)})").fetchone() or ("{}",)
        parsed = orjson.loads(text)
    except (duckdb.Error, TypeError, orjson.JSONDecodeError):
        return columns
    if parsed.get("error") or len(parsed.get("statements", [])) != 1:
        return columns  # EXPLAIN and other statements: their columns are what they are
    tree = parsed["statements"][0]["node"]
    top = _top_select(tree)
    if top is None:
        return columns
    resolver = _Resolver(tree)
    select_list = top.get("select_list", [])
    positional = len(select_list) == len(columns) and not any(e.get("class") in ("STAR", "COLUMNS")
                                                               for e in select_list)
    by_alias = {e["alias"]: e for e in select_list if e.get("alias")}
    answer = []
    for index, column in enumerate(columns):
        expression = select_list[index] if positional else by_alias.get(column)
        found = None if _has_unit(column) or expression is None else resolver.unit_column(expression)
        answer.append(found or column)
    return answer
