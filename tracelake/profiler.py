"""The producer side: a ``torch.profiler`` ``on_trace_ready`` handler that writes traces for tracelake.

Usage::

    with torch.profiler.profile(schedule=..., on_trace_ready=trace_handler("s3://bucket/traces")) as prof:
        ...  # train, calling prof.step() once per step

Each call writes one rank's trace, gzipped, to ``<url>/<run_id>/rank-<rank>.step<N>.pt.trace.json.gz``,
where N is the profiler's step number when the window closed, so the windows of a ``schedule(repeat=...)``
get distinct files. A watcher never sees half a file: a local file is written under a hidden name and
renamed; an object store gets the whole object in one upload.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import torch
import torch.distributed as dist
from isal import igzip

from pipelines.settings import RUN_ID
from pipelines.storage import filesystem, full_url, join

log = logging.getLogger(__name__)

RUN_ID_ENV = RUN_ID.name
_STORE_KEY = "tracelake/run_id"


def current_rank() -> int:
    """This process's rank: from ``torch.distributed`` when initialized, else env ``RANK``, else 0."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    value = os.environ.get("RANK", "0")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable RANK={value!r} is not an integer rank") from None


def default_run_id() -> str:
    """The run folder name every rank of one job agrees on, without being told.

    In order: env ``TRACELAKE_RUN_ID``; env ``TORCHELASTIC_RUN_ID`` (set by torchrun to the rendezvous id,
    the same on every rank) unless it is torchrun's placeholder ``none``; else a UTC timestamp with a random
    suffix (``20260105T142233Z-3fa9c1``). When ``torch.distributed`` is initialized, the first rank to ask
    publishes its timestamp in the process group's store and the others adopt it, so one job is one run.
    Without a process group each process picks its own, so multi-process jobs should set one of the variables.
    """
    for name in (RUN_ID_ENV, "TORCHELASTIC_RUN_ID"):
        value = os.environ.get(name, "").strip()
        if value and value != "none":
            return value
    candidate = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)
    if dist.is_available() and dist.is_initialized():
        # compare_set with an empty expected value sets the key only if it is absent: the first rank wins.
        return dist.distributed_c10d._get_default_store().compare_set(_STORE_KEY, "", candidate).decode()
    return candidate


def trace_file_name(rank: int, step_num: int) -> str:
    """The file name of one rank's trace for the window that closed at ``step_num``."""
    return f"rank-{rank}.step{step_num}.pt.trace.json.gz"


def trace_handler(
    url: str, *, run_id: str | None = None, storage_options: dict[str, Any] | None = None
) -> Callable[[torch.profiler.profile], None]:
    """Return an ``on_trace_ready`` callback writing each window's trace under ``url`` (a path or fsspec URL).

    ``run_id`` defaults to :func:`default_run_id`, resolved at the first write and kept for later windows.
    """

    def handle(prof: torch.profiler.profile) -> None:
        nonlocal run_id
        if run_id is None:
            run_id = default_run_id()
        fs, root = filesystem(url, storage_options)
        name = trace_file_name(current_rank(), prof.step_num)
        dest = join(root, run_id, name)
        with tempfile.TemporaryDirectory(prefix="tracelake-") as tmp:
            # The trace records this path as its traceName, so it carries the final file name.
            plain = Path(tmp) / name.removesuffix(".gz")
            packed = Path(tmp) / name
            prof.export_chrome_trace(str(plain))
            # isal's level 2 is several times faster than gzip's default 9; training waits on this.
            with open(plain, "rb") as src, igzip.open(packed, "wb") as out:  # type: ignore[no-untyped-call]
                shutil.copyfileobj(src, out, 1 << 20)
            publish(fs, packed, dest)
        log.info("wrote trace %s", full_url(fs, dest))

    return handle


def publish(fs: fsspec.AbstractFileSystem, local: Path, dest: str) -> None:
    """Copy ``local`` to ``dest`` on ``fs`` so that readers see either nothing or the whole file.

    Local destinations go to a hidden name (discovery skips names starting with ``.``) in the same folder and
    are renamed into place. Object stores expose an object only once its upload completes, whether s3fs sends
    one PUT or, for large files, a multipart upload.
    """
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    try:
        if protocol not in ("file", "local"):
            fs.put_file(str(local), dest)
            return
        folder, name = dest.rsplit("/", 1)
        fs.makedirs(folder, exist_ok=True)
        hidden = f"{folder}/.{name}.{secrets.token_hex(4)}.tmp"
        try:
            fs.put_file(str(local), hidden)
            os.replace(hidden, dest)
        finally:
            if fs.exists(hidden):
                fs.rm_file(hidden)
    except OSError as exc:
        raise OSError(f"could not write trace {full_url(fs, dest)}: {exc}") from exc
