"""SQL models: discovery, header parsing, and dependencies inferred from the SQL itself."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from pipelines.rows import small_statements
from pipelines.shipped import shipped_folder

LAYERS = ("staging", "intermediate", "marts")
"""The layers built for each run, in the order they read one another."""
FLEET_LAYER = "fleet"
"""Views over every run (``sql/fleet/``): stored in the lake's catalog (:mod:`pipelines.lake.fleet_views`), never built
per run; they read the marts of every run."""
QUERIES_LAYER = "queries"
"""Queries read with parameters (``sql/queries/``: the run comparison, the pages' figures), never stored in the lake."""
_PREFIX = {"staging": "stg_", "intermediate": "int_", "marts": "", FLEET_LAYER: "", QUERIES_LAYER: ""}
_HEADER_KEY = re.compile(r"^--\s*(grain|source|materialized|pieces|piece_name)\s*:\s*(.+)$")
_COLUMN_LINE = re.compile(r"^--\s*column:\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.+)$")
_DIFFERS_LINE = re.compile(r"^--\s*differs:\s*(.+)$")
# Intermediates are read by several models each, so they are computed once as tables by default.
_DEFAULT_MATERIALIZED = {"staging": "view", "intermediate": "table", "marts": "table", FLEET_LAYER: "view",
                         QUERIES_LAYER: "view"}
_ONLY_MATERIALIZED = {"marts": "table", FLEET_LAYER: "view", QUERIES_LAYER: "view"}


@dataclass(frozen=True)
class SqlModel:
    """One ``sql/<layer>/<name>.sql`` file: a single SELECT plus its ``--`` header."""

    name: str
    layer: str
    path: Path
    sql: str
    description: str
    grain: tuple[str, ...]
    source: str
    deps: frozenset[str]
    materialized: str
    columns: dict[str, str] = field(default_factory=dict)
    """``-- column: NAME: meaning`` lines: what a column holds where its name does not say it."""
    pieces: str = ""
    """``-- pieces: TABLE``: the model is built a batch of TABLE's pieces (its ``piece`` column) at a time, reading
    those from ``getvariable('first_piece')`` to ``getvariable('last_piece')`` (see :mod:`transforms.runner`)."""
    piece_name: str = ""
    """``-- piece_name: EXPR``: what a piece is, for errors: an aggregate over one piece's rows of the pieces table."""
    differences: tuple[str, ...] = ()
    """``-- differs: ANCHOR: what and why`` lines: where the model departs from its anchor on purpose."""


def default_sql_root() -> Path:
    """The SQL models: ``sql/`` of the installed ``transforms`` package, else the checkout's top-level ``sql/``."""
    return shipped_folder("transforms", "sql", "sql", must_hold="marts")


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    """Every object in a JSON syntax tree, depth first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)


def syntax_trees(sqls: list[str]) -> list[dict[str, Any]]:
    """DuckDB's own syntax tree of each SQL text (``json_serialize_sql``), all in one statement.

    A text that does not parse gets ``{"error": true, "error_message": ...}``."""
    with small_statements() as con:
        rows = con.execute("select json_serialize_sql(unnest($sqls))", {"sqls": sqls}).fetchall()
    return [orjson.loads(serialized) for (serialized,) in rows]


def table_references(tree: dict[str, Any]) -> frozenset[str]:
    """Names of the tables and views a parsed SELECT reads, CTE names excluded."""
    tables: set[str] = set()
    ctes: set[str] = set()
    for node in _nodes(tree["statements"]):
        if node.get("type") == "BASE_TABLE":
            tables.add(node["table_name"])
        ctes.update(entry["key"] for entry in (node.get("cte_map") or {}).get("map", ()))
    return frozenset(tables - ctes)


def parse_model(path: Path, layer: str, sql: str, tree: dict[str, Any]) -> SqlModel:
    """One model from its file's text and syntax tree. Raises ValueError naming the file when its name,
    header or SQL is wrong."""
    name = path.stem
    if not name.startswith(_PREFIX[layer]):
        raise ValueError(f"{path}: models in sql/{layer}/ must be named {_PREFIX[layer]}*")
    description, keys, columns, differences = [], {}, {}, []
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        if key := _HEADER_KEY.match(line):
            keys[key.group(1)] = key.group(2).strip()
        elif column := _COLUMN_LINE.match(line):
            columns[column.group(1)] = column.group(2).strip()
        elif differs := _DIFFERS_LINE.match(line):
            differences.append(differs.group(1).strip())
        elif not keys:  # the description is the text above the keys
            description.append(line.lstrip("-").strip())
    grain = tuple(c.strip() for c in keys["grain"].split(",")) if "grain" in keys else ()
    if layer in _ONLY_MATERIALIZED and not grain:
        raise ValueError(f"{path}: a model of sql/{layer}/ needs a '-- grain: col, ...' header line")
    materialized = keys.get("materialized", _DEFAULT_MATERIALIZED[layer])
    if materialized not in ("view", "table") or _ONLY_MATERIALIZED.get(layer, materialized) != materialized:
        raise ValueError(f"{path}: materialized must be 'view' or 'table' (marts are always tables, fleet models "
                         "always views)")
    if tree.get("error"):
        raise ValueError(f"{path}: SQL does not parse: {tree.get('error_message')}")
    deps = table_references(tree)
    description_text = " ".join(d for d in description if d)
    if keys.get("pieces") and (materialized != "table" or keys["pieces"] not in deps):
        raise ValueError(f"{path}: a model built in pieces is a table that reads its pieces table")
    return SqlModel(name, layer, path, sql, description_text, grain, keys.get("source", ""), deps, materialized,
                    columns, keys.get("pieces", ""), keys.get("piece_name", ""), tuple(differences))


def _model_files(root: Path, layers: tuple[str, ...]) -> tuple[tuple[Path, str], ...]:
    return tuple((path, path.read_text()) for layer in layers for path in sorted((root / layer).glob("*.sql")))


def discover_models(sql_root: Path | None = None) -> dict[str, SqlModel]:
    """Every model built for each run under ``sql_root`` (the :data:`LAYERS`), by name; parsed again only when a
    file was added, removed or edited."""
    root = sql_root or default_sql_root()
    files = _model_files(root, LAYERS)
    if not any(path.parent.name == "marts" for path, _ in files):
        raise FileNotFoundError(f"no SQL models in {root / 'marts'}: nothing to build")  # never an empty success
    return dict(_parse_models(files))  # a copy: the cached dict stays as parsed


def discover_fleet_views(sql_root: Path | None = None) -> dict[str, SqlModel]:
    """The views over every run (``sql/fleet/``), by name: what each row is, its grain and columns, as marts."""
    return dict(_parse_models(_model_files(sql_root or default_sql_root(), (FLEET_LAYER,))))


def discover_queries(sql_root: Path | None = None) -> dict[str, SqlModel]:
    """The parameterized queries (``sql/queries/``), by name, with their headers as marts have them."""
    return dict(_parse_models(_model_files(sql_root or default_sql_root(), (QUERIES_LAYER,))))


@functools.lru_cache(maxsize=8)
def _parse_models(files: tuple[tuple[Path, str], ...]) -> dict[str, SqlModel]:
    """The models of ``files`` (path and text of each): parsing takes ~65 ms, so once per version of the files."""
    models: dict[str, SqlModel] = {}
    for (path, sql), tree in zip(files, syntax_trees([sql for _, sql in files]), strict=True):
        model = parse_model(path, path.parent.name, sql, tree)
        if model.name in models:
            raise ValueError(f"{path}: model name {model.name} is already used by {models[model.name].path}")
        models[model.name] = model
    return models
