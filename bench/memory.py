"""Peak memory of the current process, measured so that a parent's size does not leak in."""

from __future__ import annotations

import resource
from pathlib import Path


def peak_rss_mb() -> float:
    """This process's peak resident set since it exec'd, or its largest waited-for child's, in MiB.

    ``getrusage(RUSAGE_SELF).ru_maxrss`` is no good here: on exec Linux folds the replaced
    memory map's high-water mark into it, and after ``vfork`` (what ``subprocess`` uses) that map
    is the parent's, so a child of a large pytest process reports the parent's peak. ``VmHWM`` is
    the high-water mark of the process's own map. Children (HTA's pool workers) are counted by
    their own ``ru_maxrss``.
    """
    own = next(
        int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith("VmHWM:")
    )
    return max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
