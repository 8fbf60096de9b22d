"""SQL models: discovery, header parsing, and dependencies inferred from the SQL itself."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp

LAYERS = ("staging", "intermediate", "marts")
_PREFIX = {"staging": "stg_", "intermediate": "int_", "marts": ""}
_HEADER_KEY = re.compile(r"^--\s*(grain|source|materialized)\s*:\s*(.+)$")
# Intermediates are read by several models each, so they are computed once as temp tables by default.
_DEFAULT_MATERIALIZED = {"staging": "view", "intermediate": "table", "marts": "table"}


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


def default_sql_root() -> Path:
    """The ``sql/`` folder shipped beside the packages."""
    return Path(__file__).resolve().parent.parent / "sql"


@functools.lru_cache(maxsize=256)  # sqlglot parsing dominates discovery, which runs at import and again per build
def table_references(sql: str) -> frozenset[str]:
    """Names of the tables and views a SELECT reads, CTE names excluded."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    return frozenset(t.name for t in tree.find_all(exp.Table) if t.name and t.name not in ctes)


def parse_model(path: Path, layer: str) -> SqlModel:
    """Read one model file. Raises ValueError naming the file when its name or header is wrong."""
    name = path.stem
    if not name.startswith(_PREFIX[layer]):
        raise ValueError(f"{path}: models in sql/{layer}/ must be named {_PREFIX[layer]}*")
    sql = path.read_text()
    description, keys = [], {}
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        key = _HEADER_KEY.match(line)
        if key:
            keys[key.group(1)] = key.group(2).strip()
        else:
            description.append(line.lstrip("-").strip())
    grain = tuple(c.strip() for c in keys["grain"].split(",")) if "grain" in keys else ()
    if layer == "marts" and not grain:
        raise ValueError(f"{path}: a mart needs a '-- grain: col, ...' header line")
    materialized = keys.get("materialized", _DEFAULT_MATERIALIZED[layer])
    if materialized not in ("view", "table") or (layer == "marts" and materialized != "table"):
        raise ValueError(f"{path}: materialized must be 'view' or 'table' (marts are always tables)")
    try:
        deps = table_references(sql)
    except sqlglot.errors.ParseError as exc:
        raise ValueError(f"{path}: SQL does not parse: {exc}") from exc
    description_text = " ".join(d for d in description if d)
    return SqlModel(name, layer, path, sql, description_text, grain, keys.get("source", ""), deps, materialized)


def discover_models(sql_root: Path | None = None) -> dict[str, SqlModel]:
    """Every model under ``sql_root``, by name."""
    root = sql_root or default_sql_root()
    models: dict[str, SqlModel] = {}
    for layer in LAYERS:
        for path in sorted((root / layer).glob("*.sql")):
            model = parse_model(path, layer)
            if model.name in models:
                raise ValueError(f"{path}: model name {model.name} is already used by {models[model.name].path}")
            models[model.name] = model
    return models
