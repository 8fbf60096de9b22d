"""How an ingesting process takes its heavy imports (Dagster and the assets, after the first parse has started):
once, without the garbage collector's passes over them.

The imports leave about a million objects that live as long as the process. The cyclic collections that run while
they are made free almost none (175 objects) and took 0.4-1.2 s more than the imports' ~1.5 s; frozen after, the full
collections of the run skip them too (about 0.2 s at 234 MB).
"""

from __future__ import annotations

import atexit
import gc
import importlib.abc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from transforms.svg_renderer import start_helper


@contextmanager
def heavy_imports() -> Iterator[None]:
    """Collection off while the block imports, and as it was after; what it imported is frozen after (see
    :func:`gc.freeze`)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
    gc.freeze()


class _PandasLeftOut(importlib.abc.MetaPathFinder):
    """Finds pandas for nobody: ``import pandas`` raises ModuleNotFoundError, as where it is not installed."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] == "pandas":
            raise ModuleNotFoundError(f"No module named {name!r} (tracelake's commands leave pandas out)", name=name)


def leave_out_pandas() -> None:
    """Make pandas unimportable in this process, unless something imported it already.

    DuckDB imports pandas before it binds any parameter, wherever pandas is installed (duckdb#18658: to recognise
    its values): 0.2-0.3 s and ~50 MB in every command, which no tracelake command uses. pandas comes with the
    reference tools (the test extras) or a user's notebook stack, not with tracelake; DuckDB, pyarrow, Dagster
    and polars all run without it. Only for processes that run tracelake's commands and end with them."""
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _PandasLeftOut())


def start_worker() -> None:
    """Initializer of the ``--jobs`` worker processes: the ingest's imports, as the command line takes them.

    Unfrozen at exit, so that teardown collects them (DuckDB's bindings report what it cannot as leaks). Each
    worker renders its runs' reports through a chart helper of its own (:mod:`transforms.svg_renderer`)."""
    leave_out_pandas()
    with heavy_imports():
        import tracelake.dagster_runs  # noqa: F401
    atexit.register(gc.unfreeze)
    start_helper()
