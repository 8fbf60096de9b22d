"""The operating system's wall around ``tracelake sql``'s query process, beneath DuckDB's own settings.

DuckDB lets a statement read and write alike under a folder its ``allowed_directories`` names, and an extension's
own readers (``sqlite_scan``) open files without asking DuckDB at all. So the query's process, once it has attached
the lake, moves into a root of its own (a Linux user and mount namespace, unprivileged): the lake's data folders
are there read-only, the catalog's folder as it is (SQLite's readers write their read marks beside it), the
system's and Python's folders read-only, and nothing else of the machine: no home folder, no other lake, no other
SQLite file. Whatever a statement gets past the checker and DuckDB then finds the files it would write read-only
and the files it would read absent.

Where the kernel refuses user namespaces (not Linux, or a host that locks them), the query runs without this wall
and :func:`enter` says why; DuckDB's settings and the checker still stand.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Iterable
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MS_RDONLY = 0x1
MS_REMOUNT = 0x20
SYS_MOUNT_SETATTR = 442  # the same number on x86-64 and arm64
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
# What a process that has already loaded its modules and extensions still opens: its libraries, certificates,
# name resolution and time zones (/etc, /usr, /lib*), devices (/dev/null, /dev/urandom) and /proc.
SYSTEM = ("/etc", "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/dev", "/proc")


class SandboxUnavailable(OSError):
    """The kernel refused what the sandbox needs; the message says which call."""


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _check(result: int, call: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise SandboxUnavailable(errno, f"{call}: {os.strerror(errno)}")


def enter() -> None:
    """Move this process into a user and mount namespace of its own. Call it while the process has one thread
    (right after a fork): the kernel refuses a new user namespace to a threaded process.

    Raises:
        SandboxUnavailable: not Linux, or the kernel refused a namespace.
    """
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(0, f"user namespaces are Linux's ({sys.platform})")
    uid, gid = os.getuid(), os.getgid()
    libc = _libc()
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")


def seal(root: Path, *, writable: Iterable[str], read_only: Iterable[str], scratch: Path) -> None:
    """Make ``root`` (an empty folder) this process's root, holding only ``writable`` and ``read_only`` (folders
    or files, at their own absolute paths; read-only wins where one is inside the other), :data:`SYSTEM` and
    Python's own folders read-only, and ``scratch`` as ``/tmp``. Call after :func:`enter`; threads may run.

    Raises:
        SandboxUnavailable: a mount or the change of root failed.
    """
    libc = _libc()
    here = str(Path(__file__).resolve().parents[1])  # site-packages, or the checkout of an editable install
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, here, *(p for p in sys.path if p and Path(p).is_dir())}
    (root / "tmp").mkdir()  # first: a folder kept below /tmp (a lake there) is mounted inside it
    _check(libc.mount(bytes(scratch), bytes(root / "tmp"), None, MS_BIND, None), "mount --bind scratch /tmp")
    mounts = [(path, False) for path in writable]
    mounts += [(path, True) for path in (*SYSTEM, *sorted(python), *read_only)]
    for path, ro in sorted(mounts, key=lambda mount: (len(Path(mount[0]).parts), mount[1])):
        source = Path(path)
        if not source.exists() and not source.is_symlink():
            continue
        target = root / source.relative_to("/")
        if source.is_symlink() and str(source) in SYSTEM:  # /lib -> usr/lib on a merged /usr
            if not target.is_symlink():
                target.symlink_to(os.readlink(source))
            continue
        source = source.resolve()
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch(exist_ok=True)
        _check(libc.mount(bytes(source), bytes(target), None, MS_BIND | MS_REC, None), f"mount --rbind {source}")
        if ro:
            _read_only(libc, target)
    os.chdir(root)
    _check(libc.chroot(b"."), "chroot")
    os.chdir("/")


def _read_only(libc: ctypes.CDLL, target: Path) -> None:
    """Make the mount at ``target`` and every mount under it read-only, keeping the flags the kernel locks."""
    attr = _MountAttr(attr_set=MOUNT_ATTR_RDONLY)
    done = libc.syscall(SYS_MOUNT_SETATTR, -100, bytes(target), AT_RECURSIVE, ctypes.byref(attr),
                        ctypes.sizeof(attr))
    if done == 0:
        return
    flags = os.statvfs(target).f_flag & (os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC)  # before mount_setattr (5.12)
    _check(libc.mount(None, bytes(target), None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags, None),
           f"mount -o remount,ro {target}")
