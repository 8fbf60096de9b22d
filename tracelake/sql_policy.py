"""What ``tracelake sql`` may run, decided from DuckDB's own syntax tree of the query with allow-lists.

A query may read the lake's tables (bare names, ``raw.NAME``/``marts.NAME`` or ``lake.raw.NAME``/``lake.marts.NAME``,
``AT (VERSION => N)`` included), its own CTEs and subqueries, a few table functions that make rows out of their
arguments, and the scalar, aggregate and window functions listed here. Everything else is refused by name before
anything runs: file and URL readers (``read_*``, ``*_scan``, replacement scans of a quoted path), other databases
(``sqlite_*``, ``postgres_*``, the catalog's own database), ``query``/``query_table``, ``ducklake_*`` maintenance
(``merge_adjacent_files`` writes files), settings, variables and the environment. A node of the tree of a kind not
named here is refused too, so a construct DuckDB adds later is refused until someone reads it and lists it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import duckdb
import orjson

from pipelines.lake.lake import ALIAS, LAYERS
from pipelines.rows import one, sql_path

# Table functions in FROM: rows made from their arguments only.
TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})
# The lake's own read-only views of its catalog (``lake.snapshots()``), and DuckDB's listing of the tables and
# columns in this connection (names and types, no rows: ``tracelake tables`` reads its columns so).
LAKE_TABLE_FUNCTIONS = frozenset({"snapshots", "current_snapshot", "table_info"})
CATALOG_TABLE_FUNCTIONS = frozenset({"duckdb_columns", "duckdb_tables"})

OPERATORS = frozenset({
    "+", "-", "*", "/", "//", "%", "**", "^", "@", "&", "|", "~", "<<", ">>", "!__postfix", "||", "^@",
    "~~", "!~~", "~~*", "!~~*", "~~~", "&&", "<@", "@>", "<->", "<=>", "->>",
})
NUMERIC = frozenset({
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bit_count", "cbrt", "ceil",
    "ceiling", "cos", "cosh", "cot", "degrees", "divide", "even", "exp", "factorial", "fdiv", "fmod", "gamma", "gcd",
    "greatest", "greatest_common_divisor", "isfinite", "isinf", "isnan", "lcm", "least", "least_common_multiple",
    "lgamma", "ln", "log", "log10", "log2", "mod", "multiply", "nextafter", "pi", "pow", "power", "radians", "random",
    "round", "round_even", "roundbankers", "sign", "signbit", "sin", "sinh", "sqrt", "subtract", "tan", "tanh", "trunc",
    "xor", "equi_width_bins", "format_bytes", "formatReadableDecimalSize", "formatReadableSize",
    "parse_formatted_bytes",
})
TEXT = frozenset({
    "ascii", "bar", "base64", "bin", "bit_length", "char_length", "character_length", "chr", "concat", "concat_ws",
    "contains", "damerau_levenshtein", "decode", "editdist3", "encode", "ends_with", "format", "from_base64",
    "from_binary", "from_hex", "hamming", "hash", "hex", "ilike_escape", "instr", "jaccard", "jaro_similarity",
    "jaro_winkler_similarity", "lcase", "left", "left_grapheme", "len", "length", "length_grapheme", "levenshtein",
    "like_escape", "lower", "lpad", "ltrim", "md5", "md5_number", "md5_number_lower", "md5_number_upper", "mismatches",
    "murmur3_32", "nfc_normalize", "not_ilike_escape", "not_like_escape", "octet_length", "ord", "parse_dirname",
    "parse_dirpath", "parse_filename", "parse_path", "position", "prefix", "printf", "regexp_escape",
    "regexp_extract", "regexp_extract_all", "regexp_full_match", "regexp_matches", "regexp_replace",
    "regexp_split_to_array", "repeat", "replace", "reverse", "right", "right_grapheme", "rpad", "rtrim", "sha1",
    "sha256", "split", "split_part", "starts_with", "str_split", "str_split_regex", "strip_accents", "string_split",
    "string_split_regex", "string_to_array", "strlen", "strpos", "substr", "substring", "substring_grapheme",
    "suffix", "to_base", "to_base64", "to_binary", "to_hex", "translate", "trim", "ucase", "unbin", "unhex",
    "unicode", "upper", "url_decode", "url_encode", "get_bit", "set_bit", "bit_position", "bitstring",
})
TIME = frozenset({
    "age", "ago", "century", "current_date", "current_localtime", "current_localtimestamp", "date_add", "date_diff",
    "date_part", "date_sub", "date_trunc", "datediff", "datepart", "datesub", "datetrunc", "day", "dayname",
    "dayofmonth", "dayofweek", "dayofyear", "days_in_month", "decade", "epoch", "epoch_ms", "epoch_ns", "epoch_us",
    "era", "get_current_time", "get_current_timestamp", "hour", "isodow", "isoyear", "julian", "last_day",
    "make_date", "make_time", "make_timestamp", "make_timestamp_ms", "make_timestamp_ns", "make_timestamptz",
    "microsecond", "millennium", "millisecond", "minute", "month", "monthname", "nanosecond", "normalized_interval",
    "now", "quarter", "second", "strftime", "strptime", "time_bucket", "timezone", "timezone_hour",
    "timezone_minute", "to_centuries", "to_days", "to_decades", "to_hours", "to_microseconds", "to_millennia",
    "to_milliseconds", "to_minutes", "to_months", "to_quarters", "to_seconds", "to_timestamp", "to_weeks",
    "to_years", "today", "transaction_timestamp", "try_strptime", "week", "weekday", "weekofyear", "year",
    "yearweek",
})
NESTED = frozenset({
    "aggregate", "apply", "array_aggr", "array_aggregate", "array_append", "array_apply", "array_cat",
    "array_concat", "array_contains", "array_cosine_distance", "array_cosine_similarity", "array_cross_product",
    "array_distance", "array_distinct", "array_dot_product", "array_extract", "array_filter", "array_grade_up",
    "array_has", "array_has_all", "array_has_any", "array_indexof", "array_inner_product", "array_intersect",
    "array_length", "array_negative_dot_product", "array_negative_inner_product", "array_pop_back",
    "array_pop_front", "array_position", "array_prepend", "array_push_back", "array_push_front", "array_reduce",
    "array_resize", "array_reverse", "array_reverse_sort", "array_select", "array_slice", "array_sort",
    "array_to_string", "array_transform", "array_unique", "array_value", "array_where", "array_zip", "cardinality",
    "element_at", "filter", "flatten", "generate_series", "generate_subscripts", "grade_up", "list_aggr",
    "list_aggregate", "list_any_value", "list_append", "list_apply", "list_approx_count_distinct", "list_avg",
    "list_bit_and", "list_bit_or", "list_bit_xor", "list_bool_and", "list_bool_or", "list_cat", "list_concat",
    "list_contains", "list_cosine_distance", "list_cosine_similarity", "list_count", "list_distance",
    "list_distinct", "list_dot_product", "list_element", "list_entropy", "list_extract", "list_filter",
    "list_first", "list_grade_up", "list_has", "list_has_all", "list_has_any", "list_histogram", "list_indexof",
    "list_inner_product", "list_intersect", "list_kurtosis", "list_kurtosis_pop", "list_last", "list_mad",
    "list_max", "list_median", "list_min", "list_mode", "list_negative_dot_product", "list_negative_inner_product",
    "list_pack", "list_position", "list_prepend", "list_product", "list_reduce", "list_resize", "list_reverse",
    "list_reverse_sort", "list_select", "list_sem", "list_skewness", "list_slice", "list_sort", "list_stddev_pop",
    "list_stddev_samp", "list_string_agg", "list_sum", "list_transform", "list_unique", "list_value",
    "list_var_pop", "list_var_samp", "list_where", "list_zip", "map", "map_concat", "map_contains",
    "map_contains_entry", "map_contains_value", "map_entries", "map_extract", "map_extract_value",
    "map_from_entries", "map_keys", "map_values", "range", "reduce", "row", "struct_concat", "struct_contains",
    "struct_extract", "struct_extract_at", "struct_has", "struct_indexof", "struct_insert", "struct_keys",
    "struct_pack", "struct_position", "struct_update", "struct_values", "union_extract", "union_tag",
    "union_value", "unnest",
})
JSON = frozenset({
    "array_to_json", "from_json", "from_json_strict", "json", "json_array", "json_array_length", "json_contains",
    "json_exists", "json_extract", "json_extract_path", "json_extract_path_text", "json_extract_string",
    "json_keys", "json_merge_patch", "json_object", "json_pretty", "json_quote", "json_structure",
    "json_transform", "json_transform_strict", "json_type", "json_valid", "json_value", "row_to_json", "to_json",
    "json_group_array", "json_group_object", "json_group_structure",
})
OTHER = frozenset({
    "constant_or_null", "enum_code", "enum_first", "enum_last", "enum_range", "enum_range_boundary",
    "gen_random_uuid", "nullif", "switch", "typeof", "uuid", "uuid_extract_timestamp",
    "uuid_extract_version", "uuidv4", "uuidv7",
})
AGGREGATES = frozenset({
    "any_value", "approx_count_distinct", "approx_quantile", "approx_top_k", "arbitrary", "arg_max", "arg_max_null",
    "arg_max_nulls_last", "arg_min", "arg_min_null", "arg_min_nulls_last", "argmax", "argmin", "array_agg", "avg",
    "bit_and", "bit_or", "bit_xor", "bitstring_agg", "bool_and", "bool_or", "corr", "count", "count_if",
    "count_star", "countif", "covar_pop", "covar_samp", "entropy", "favg", "first", "fsum", "geomean",
    "geometric_mean", "group_concat", "histogram", "histogram_exact", "kahan_sum", "kurtosis", "kurtosis_pop",
    "last", "list", "listagg", "mad", "max", "max_by", "mean", "median", "min", "min_by", "mode", "product",
    "quantile", "quantile_cont", "quantile_disc", "regr_avgx", "regr_avgy", "regr_count", "regr_intercept",
    "regr_r2", "regr_slope", "regr_sxx", "regr_sxy", "regr_syy", "reservoir_quantile", "sem", "skewness", "stddev",
    "stddev_pop", "stddev_samp", "string_agg", "sum", "sumkahan", "var_pop", "var_samp", "variance", "wavg",
    "weighted_avg",
})
WINDOW_ONLY = frozenset({
    "row_number", "rank", "dense_rank", "rank_dense", "percent_rank", "cume_dist", "ntile", "lag", "lead",
    "first_value", "last_value", "nth_value", "fill",
})
FUNCTIONS = frozenset(name.lower() for name in OPERATORS | NUMERIC | TEXT | TIME | NESTED | JSON | OTHER | AGGREGATES)
WINDOW_FUNCTIONS = AGGREGATES | WINDOW_ONLY

# Kinds of node in the tree: expressions by "class", everything else (query nodes, FROM items, modifiers,
# orderings, type descriptions) by "type".
EXPRESSIONS = frozenset({
    "BETWEEN", "CASE", "CAST", "COLLATE", "COLUMN_REF", "COMPARISON", "CONJUNCTION", "CONSTANT", "FUNCTION",
    "LAMBDA", "OPERATOR", "POSITIONAL_REFERENCE", "STAR", "SUBQUERY", "WINDOW",
})
NODES = frozenset({
    "SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE", "BASE_TABLE", "JOIN", "SUBQUERY",
    "EMPTY", "EXPRESSION_LIST", "TABLE_FUNCTION", "PIVOT", "SHOW_REF", "ORDER_MODIFIER", "LIMIT_MODIFIER",
    "LIMIT_PERCENT_MODIFIER", "DISTINCT_MODIFIER", "ASCENDING", "DESCENDING", "ORDER_DEFAULT",
})

HOW_TO_NAME = f"name the lake's tables by bare name (tracelake tables lists them) or as {ALIAS}.raw.NAME / {ALIAS}.marts.NAME"


class QueryRefused(ValueError):
    """The query names something ``tracelake sql`` does not allow; the message says what."""


# EXPLAIN's options that change only how a plan is shown; ANALYZE runs the statement, which is judged as run.
EXPLAIN_FORMATS = frozenset({"text", "json", "html", "graphviz", "yaml"})


def statement_to_run(con: duckdb.DuckDBPyConnection, query: str, tables: Iterable[str]) -> str:
    """The statement ``tracelake sql`` runs for ``query``: one SELECT, or an EXPLAIN [ANALYZE] of one, rebuilt from
    DuckDB's own parse so that what runs is exactly what was judged (``tables``: the lake's table names).

    An EXPLAIN is split into its options and the statement it explains by DuckDB's tokens, which skip comments,
    never by reading the text; the explained statement must itself be one SELECT that :func:`check_query` allows,
    and the EXPLAIN that runs is made here from that statement and the options understood, not the user's text.

    Raises:
        QueryRefused: not one statement, not a SELECT (or an EXPLAIN of one), or naming what is not allowed.
    """
    statement = _one_statement(con, query)
    if statement.type == duckdb.StatementType.SELECT:
        check_query(con, statement.query, tables)
        return str(statement.query)
    if statement.type != duckdb.StatementType.EXPLAIN:
        raise QueryRefused(f"tracelake sql is read-only: {statement.type.name} statements are not allowed")
    prefix, explained = _explain_parts(statement.query)
    inner = _one_statement(con, explained)
    if inner.type != duckdb.StatementType.SELECT:
        raise QueryRefused(f"tracelake sql explains SELECTs only, not {inner.type.name} statements")
    check_query(con, inner.query, tables)
    rebuilt = f"{prefix} {inner.query}"
    again, explained_again = _explain_parts(rebuilt)  # read back as built, or not run at all
    if again != prefix or _one_statement(con, explained_again).query != inner.query:
        raise QueryRefused("tracelake sql could not rebuild this EXPLAIN unambiguously")
    return rebuilt


def _one_statement(con: duckdb.DuckDBPyConnection, text: str) -> Any:
    try:
        statements = con.extract_statements(text)
    except duckdb.Error as exc:
        raise QueryRefused(f"tracelake sql runs one SELECT: {exc}") from None
    if len(statements) != 1:
        raise QueryRefused(f"expected one SQL statement, got {len(statements)}")
    return statements[0]


def _explain_parts(explain: str) -> tuple[str, str]:
    """``(the EXPLAIN to run without its statement, the statement's text)`` of an EXPLAIN statement, from DuckDB's
    tokens: ``EXPLAIN``, then either ``ANALYZE`` or a parenthesised list of ``ANALYZE [bool]`` and ``FORMAT name``."""
    tokens = [position for position, _ in duckdb.tokenize(explain)]
    words = [_token_text(explain, position) for position in tokens]
    if not words or words[0] != "explain":
        raise QueryRefused("an EXPLAIN must start with EXPLAIN")
    analyze, fmt, index = False, None, 1
    if words[index:index + 1] == ["analyze"]:
        analyze, index = True, index + 1
    elif words[index:index + 1] == ["("]:
        index += 1
        while True:
            word = words[index] if index < len(words) else ""
            if word == "analyze":
                index += 1
                analyze = words[index] not in ("false", "0", "off") if words[index] not in (",", ")") else True
                index += words[index] not in (",", ")")
            elif word == "format" and index + 1 < len(words) and words[index + 1] in EXPLAIN_FORMATS:
                fmt, index = words[index + 1], index + 2
            else:
                raise QueryRefused("EXPLAIN's options may be ANALYZE and FORMAT only")
            if words[index:index + 1] == [","]:
                index += 1
            elif words[index:index + 1] == [")"]:
                index += 1
                break
            else:
                raise QueryRefused("EXPLAIN's options may be ANALYZE and FORMAT only")
    if index >= len(words):
        raise QueryRefused("an EXPLAIN needs a statement to explain")
    options = ", ".join(([] if not analyze else ["analyze"]) + ([] if fmt is None else [f"format {fmt}"]))
    return f"explain ({options})" if options else "explain", explain[tokens[index]:]


def _token_text(text: str, position: int) -> str:
    """A token's text, lower case: a word (keyword, identifier, number) or one character of punctuation."""
    match = re.match(r"[A-Za-z0-9_]+", text[position:])
    return match[0].lower() if match else text[position]


def check_query(con: duckdb.DuckDBPyConnection, select: str, tables: Iterable[str]) -> None:
    """Refuse ``select`` (one SELECT's text) unless everything it names is allowed; ``tables``: the lake's table names.

    Raises:
        QueryRefused: naming the first table, function or construct that is not allowed.
    """
    (serialized,) = one(con.execute(f"select json_serialize_sql({sql_path(select)})"))  # a parameter imports pandas
    tree = orjson.loads(serialized)
    if tree.get("error"):
        raise QueryRefused(f"tracelake sql runs one SELECT: {tree.get('error_message')}")
    _Walk(frozenset(name.lower() for name in tables)).visit(tree["statements"], frozenset())


class _Walk:
    def __init__(self, tables: frozenset[str]) -> None:
        self.tables = tables

    def visit(self, node: Any, ctes: frozenset[str]) -> None:
        if isinstance(node, list):
            for item in node:
                self.visit(item, ctes)
            return
        if not isinstance(node, dict):
            return
        if "cte_map" in node:  # each CTE sees those before it and itself (recursive); the query sees them all
            entries = node["cte_map"]["map"]
            for index, entry in enumerate(entries):
                self.visit(entry["value"], ctes | {e["key"].lower() for e in entries[: index + 1]})
            ctes = ctes | {entry["key"].lower() for entry in entries}
        self._check(node, ctes)
        for key, value in node.items():
            if key == "cte_map" or (key == "function" and node.get("type") == "TABLE_FUNCTION"):
                continue
            self.visit(value, ctes)
        if node.get("type") == "TABLE_FUNCTION":
            self.visit(node["function"]["children"], ctes)

    def _check(self, node: dict[str, Any], ctes: frozenset[str]) -> None:
        kind = node.get("class")
        if kind is not None:
            if kind not in EXPRESSIONS:
                raise QueryRefused(f"{kind.lower().replace('_', ' ')} expressions are not allowed")
            if kind == "FUNCTION":
                _check_function(node, FUNCTIONS)
            elif kind == "WINDOW":
                _check_function(node, WINDOW_FUNCTIONS)
            return
        kind = node.get("type")
        if not isinstance(kind, str) or kind.endswith("_TYPE_INFO"):
            return
        if kind not in NODES:
            raise QueryRefused(f"{kind.lower().replace('_', ' ')} is not allowed")
        if kind == "BASE_TABLE":
            self._check_table(node, ctes)
        elif kind == "TABLE_FUNCTION":
            _check_table_function(node["function"])
        elif kind == "SHOW_REF" and node.get("table_name"):
            raise QueryRefused(f"SHOW {node['table_name']} is not allowed: {HOW_TO_NAME}")

    def _check_table(self, node: dict[str, Any], ctes: frozenset[str]) -> None:
        catalog, schema, name = node["catalog_name"], node["schema_name"], node["table_name"]
        qualified = catalog in ("", ALIAS) and schema in LAYERS
        bare = not catalog and not schema and name.lower() in ctes | self.tables
        if not (qualified or bare):
            shown = ".".join(part for part in (catalog, schema, name) if part)
            raise QueryRefused(f"{shown!r} is not a table of the lake: {HOW_TO_NAME}")


def _check_function(node: dict[str, Any], allowed: frozenset[str]) -> None:
    name = node["function_name"]
    if node.get("catalog") or node.get("schema") not in ("", "main") or name.lower() not in allowed:
        shown = ".".join(part for part in (node.get("catalog"), node.get("schema"), name) if part)
        raise QueryRefused(f"function {shown!r} is not allowed (tracelake sql allows SQL's scalar, aggregate "
                           "and window functions, not those that reach files, other databases or settings)")


def _check_table_function(function: dict[str, Any]) -> None:
    name, schema = function["function_name"].lower(), function["schema"]
    allowed = (
        (not function["catalog"] and not schema and name in TABLE_FUNCTIONS | CATALOG_TABLE_FUNCTIONS)
        or (not function["catalog"] and schema == ALIAS and name in LAKE_TABLE_FUNCTIONS)
    )
    if not allowed:
        shown = ".".join(part for part in (function["catalog"], schema, function["function_name"]) if part)
        raise QueryRefused(
            f"table function {shown!r} is not allowed: FROM reads the lake's tables, CTEs, subqueries, "
            f"{', '.join(sorted(TABLE_FUNCTIONS))} and {', '.join(f'{ALIAS}.{n}()' for n in sorted(LAKE_TABLE_FUNCTIONS))}"
        )
