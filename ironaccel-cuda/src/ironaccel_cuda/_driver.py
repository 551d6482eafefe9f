"""Load `cuda.bindings`, run `cuInit` once, and make the cold driver calls.

Nothing here runs at package import: the first Device, probe or compile calls
`driver()`.  Without a driver, `cuda.bindings` raises from `cuInit` (cuda.pathfinder
cannot find libcuda.so.1) instead of returning a code; that, a missing binding and
`CUDA_ERROR_NO_DEVICE` all become `NotAvailable` with the reason.

`call(op, *args)` is the one way to make a driver call off the hot path: it
names the op, checks the result and returns the outputs.  Hot calls live in
`_core`.

Fork: CUDA cannot be used in a child forked after the parent initialised it.
An `os.register_at_fork` hook marks the child, and every later call (cold or
compiled) raises `InvalidState` naming the op -- without a per-call `getpid`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from .errors import BACKEND, InvalidState, NotAvailable, Unsupported, driver_error

_lock = threading.Lock()
_driver: ModuleType | None = None
_failure: NotAvailable | None = None
_initialised = False  # cuInit succeeded in this process
forked = False  # set in a child forked after cuInit

DRIVER_FIX = (
    "install the NVIDIA driver (it provides libcuda.so.1) and run on a machine with an NVIDIA GPU; "
    "in containers, start with the GPU exposed (--gpus all)"
)
FORK_DETAIL = (
    "CUDA was initialised in the parent process and cannot be used in a forked child; "
    "start workers with multiprocessing's 'spawn' or 'forkserver' method"
)


def fork_error(op: str) -> InvalidState:
    return InvalidState(BACKEND, op, detail=FORK_DETAIL)


def driver() -> ModuleType:
    """The initialised `cuda.bindings.driver` module; NotAvailable says why not."""
    if _driver is not None and not forked:
        return _driver
    return _load()


def _load() -> ModuleType:
    global _driver, _failure, _initialised
    with _lock:
        if forked:
            raise fork_error("cuInit")
        if _driver is not None:
            return _driver
        if _failure is not None:
            raise _copy(_failure)
        try:
            _driver = _init()
        except NotAvailable as exc:
            _failure = exc
            raise
        _initialised = True
        return _driver


def _copy(exc: NotAvailable) -> NotAvailable:
    return NotAvailable(
        BACKEND, exc.reason, fix=exc.fix, library=exc.library, searched=exc.searched,
        code=exc.code, code_name=exc.code_name,
    )


def _init() -> ModuleType:
    from ironaccel.probing import import_binding

    drv = import_binding(BACKEND, "cuda.bindings.driver", "cuda-bindings")
    try:
        (err,) = drv.cuInit(0)
    except RuntimeError as exc:  # cuda.pathfinder's DynamicLibNotFoundError and friends
        raise NotAvailable(
            BACKEND,
            f"the NVIDIA driver library libcuda.so.1 could not be loaded ({type(exc).__name__}: {exc})",
            fix=DRIVER_FIX,
            library="libcuda.so.1",
            searched=("dlopen(libcuda.so.1)",),
        ) from exc
    if err:
        code = int(err)
        name = getattr(err, "name", str(code))
        if code == 100:
            reason = "the NVIDIA driver is installed but found no CUDA-capable device (CUDA_ERROR_NO_DEVICE)"
        else:
            reason = f"cuInit failed with {name} ({code})"
        raise NotAvailable(BACKEND, reason, fix=DRIVER_FIX, library="libcuda.so.1", code=code, code_name=name)
    return drv


# In a forked child these do nothing (the parent owns what they would release).
RELEASE_OPS = frozenset({
    "cuStreamDestroy", "cuEventDestroy", "cuMemFree", "cuMemFreeAsync", "cuMemFreeHost", "cuMemHostUnregister",
    "cuModuleUnload", "cuGraphDestroy", "cuGraphExecDestroy", "cuArrayDestroy", "cuTexObjectDestroy",
    "cuSurfObjectDestroy",
})


def call(op: str, *args: Any) -> Any:
    """Call driver function `op`; raise its typed error; return its outputs.

    Returns None for calls with no output, the value for one output and a
    tuple for several.  In a forked child, releases do nothing and every
    other call raises InvalidState.
    """
    if forked:
        if op in RELEASE_OPS:
            return None
        raise fork_error(op)
    drv = driver()
    try:
        result = getattr(drv, op)(*args)
    except AttributeError:
        raise Unsupported(BACKEND, op, f"cuda.bindings {_binding_version()} has no {op}") from None
    except RuntimeError as exc:  # symbol missing from an older driver
        if forked:
            raise fork_error(op) from None
        raise Unsupported(BACKEND, op, f"the driver does not provide {op}: {exc}") from None
    err = result[0]
    if err:
        raise driver_error(err, op)
    n = len(result)
    if n == 1:
        return None
    if n == 2:
        return result[1]
    return result[1:]


def trim_after_oom() -> None:
    """Cold path of a failed cuMemAllocAsync: give back what the attempt left reserved.

    Seen: after cuMemAllocAsync of the whole device failed, the current
    device's default pool kept nearly all of its memory reserved, so another
    process could not even create a context.  Trimming the pool
    to zero releases only memory that no allocation uses.
    """
    try:
        drv = driver()
        err, dev = drv.cuCtxGetDevice()
        if not err:
            err, pool = drv.cuDeviceGetDefaultMemPool(dev)
            if not err:
                drv.cuMemPoolTrimTo(pool, 0)
    except Exception:
        pass


def try_call(op: str, *args: Any) -> tuple[int, Any]:
    """Like `call` but returns (code, outputs) instead of raising on a driver error."""
    if forked:
        raise fork_error(op)
    drv = driver()
    result = getattr(drv, op)(*args)
    err = int(result[0])
    n = len(result)
    return err, (None if n == 1 else result[1] if n == 2 else result[1:])


@contextmanager
def relaxed_capture(d: Any) -> Iterator[bool]:
    """This thread's stream-capture mode relaxed for the block (through `d`, cuda.bindings' driver module), and
    put back after: a query or a wait made inside then cannot invalidate a global- or thread-local-mode capture
    this thread has in progress.  Yields False when the mode could not be changed (an entry point this driver
    lacks, or an error); the block still runs."""
    try:
        err, mode = d.cuThreadExchangeStreamCaptureMode(d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED)
    except RuntimeError:  # cuda.bindings: an entry point this driver lacks
        err = 1
    if err:
        yield False
        return
    try:
        yield True
    finally:
        d.cuThreadExchangeStreamCaptureMode(mode)


def _binding_version() -> str:
    from ironaccel.probing import distribution_version

    return distribution_version("cuda-bindings") or "?"


def binding_version() -> str | None:
    from ironaccel.probing import distribution_version

    return distribution_version("cuda-bindings") or distribution_version("cuda-python")


def _after_fork_in_child() -> None:
    global forked
    if not _initialised:
        return  # CUDA was never initialised in the parent: the child may start fresh
    forked = True
    import sys

    core = sys.modules.get(__package__ + "._core")
    if core is not None:
        core.disable(FORK_DETAIL)


os.register_at_fork(after_in_child=_after_fork_in_child)
