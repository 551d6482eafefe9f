"""What a compute backend must know about the process it runs in: forks, and the runtime directory.

Fork: GPU drivers keep threads, fences and mappings that a child made by
`os.fork()` does not get, so a call on a device opened before the fork hangs
or crashes there.  An `os.register_at_fork` hook counts forks; a device
remembers the count it was opened under (`generation()`) and every call
compares the two, so the check costs one comparison and no `getpid`.

Runtime directory: libwayland-client, which wgpu-native's EGL probe and Mesa
load, prints "XDG_RUNTIME_DIR is invalid or not set" on every connection
attempt when the variable is missing (headless machines, containers, CI).
`ensure_runtime_dir()` points it, for this process and its children, at a
private mode-700 folder that is removed at exit.  A variable that already
names an existing folder by its absolute path is left alone.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading

from ..errors import InvalidState

__all__ = ["generation", "fork_error", "ensure_runtime_dir", "RUNTIME_DIR_ENV"]

RUNTIME_DIR_ENV = "XDG_RUNTIME_DIR"
FORK_DETAIL = ("this device was opened before os.fork(); a forked child cannot use it (its driver state did not "
               "come along). Open devices in the child, or start workers with multiprocessing's 'spawn' or "
               "'forkserver' method")

_forks = 0


def _count_fork() -> None:
    global _forks
    _forks += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_count_fork)


def generation() -> int:
    """How many forks separate this process from the first one; a device records it when opened."""
    return _forks


def fork_error(backend: str, op: str) -> InvalidState:
    """The error a device used in a forked child raises: `op` of `backend` is InvalidState, saying why."""
    return InvalidState(backend, op, detail=FORK_DETAIL)


_runtime_lock = threading.Lock()


def ensure_runtime_dir() -> str:
    """XDG_RUNTIME_DIR, after pointing it at a private folder if it was unset or not an absolute path."""
    with _runtime_lock:
        current = os.environ.get(RUNTIME_DIR_ENV, "")
        if current.startswith("/") and os.path.isdir(current):
            return current
        folder = tempfile.mkdtemp(prefix="ironaccel-runtime-")  # mode 700, as the XDG spec asks
        os.environ[RUNTIME_DIR_ENV] = folder
        owner = os.getpid()

        def remove() -> None:
            if os.getpid() == owner:  # not in a forked child that exits first
                shutil.rmtree(folder, ignore_errors=True)

        atexit.register(remove)
        return folder
