"""The ironaccel hot-path functions this package calls, named in one place.

Every hot call of the PyCUDA surface (allocation, copies, memsets, launches,
stream and event waits) goes straight to `ironaccel_cuda._core` -- compiled C
calling the driver through function pointers when the compiled module is
built -- never through `cuda.bindings` from Python.  Handles are `_core`'s
opaque handles: ints on the compiled path, `cuda.bindings` objects on the
pure-Python one; `COMPILED` says which, so the hottest callers can pass plain
integers (device pointers) through without converting them.
"""

from __future__ import annotations

from typing import Any

from ironaccel_cuda import _core

COMPILED = True  # ironaccel-cuda has one hot path, compiled: handles are ints
CLOSED = _core.CLOSED


def _identity(value: Any) -> Any:
    return value


bind = _core.bind
ensure = _core.ensure
stream_handle = event_handle = function_handle = _identity
to_int = int
stream_sync = _core.stream_sync
stream_query = _core.stream_query
stream_wait = _core.stream_wait
event_create = _core.event_create
event_destroy = _core.event_destroy
event_record = _core.event_record
event_sync = _core.event_sync
event_query = _core.event_query
mem_alloc_async = _core.mem_alloc_async
mem_free_async = _core.mem_free_async
mem_alloc = _core.mem_alloc
mem_free = _core.mem_free
memcpy_htod = _core.memcpy_htod
memcpy_dtoh = _core.memcpy_dtoh
memcpy_dtod = _core.memcpy_dtod
memset_d8 = _core.memset_d8
memset_d16 = _core.memset_d16
memset_d32 = _core.memset_d32
launch = _core.launch
pinned_add = _core.pinned_add
pinned_remove = _core.pinned_remove

LEGACY: Any = 0  # the legacy default stream of the thread's current context


def devptr(value: Any) -> Any:
    """A device pointer handle from an int-like value (a DeviceAllocation, an int, numpy's intp)."""
    return value


def context_handle(h: Any) -> Any:
    """What `bind`/`ensure` take for a CUcontext: an int on the compiled path (compared by value), the
    binding's object on the pure-Python one (compared by identity, so keep the one returned here)."""
    return int(h) if COMPILED else h


def no_context() -> Any:
    """The handle that unbinds every context from this thread (cuCtxSetCurrent(NULL))."""
    if COMPILED:
        return 0
    from cuda.bindings import driver

    return driver.CUcontext(0)
