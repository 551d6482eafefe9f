"""The ironaccel hot-path functions this package calls, named in one place.

Every hot call of the PyCUDA surface (allocation, copies, memsets, launches,
stream and event waits) goes straight to `ironaccel_cuda._hot` -- compiled C
calling the driver through function pointers when the compiled module is
built -- never through `cuda.bindings` from Python.  Handles are `_hot`'s
opaque handles: ints on the compiled path, `cuda.bindings` objects on the
pure-Python one; `COMPILED` says which, so the hottest callers can pass plain
integers (device pointers) through without converting them.
"""

from __future__ import annotations

from typing import Any

from ironaccel_cuda import _hot

COMPILED = _hot.IMPLEMENTATION == "compiled"
CLOSED = _hot.CLOSED

bind = _hot.bind
ensure = _hot.ensure
stream_handle = _hot.stream_handle
event_handle = _hot.event_handle
function_handle = _hot.function_handle
to_int = _hot.to_int
stream_sync = _hot.stream_sync
stream_query = _hot.stream_query
stream_wait = _hot.stream_wait
event_create = _hot.event_create
event_destroy = _hot.event_destroy
event_record = _hot.event_record
event_sync = _hot.event_sync
event_query = _hot.event_query
mem_alloc_async = _hot.mem_alloc_async
mem_free_async = _hot.mem_free_async
mem_alloc = _hot.mem_alloc
mem_free = _hot.mem_free
memcpy_htod = _hot.memcpy_htod
memcpy_dtoh = _hot.memcpy_dtoh
memcpy_dtod = _hot.memcpy_dtod
memset_d8 = _hot.memset_d8
memset_d16 = _hot.memset_d16
memset_d32 = _hot.memset_d32
launch = _hot.launch
pinned_add = _hot.pinned_add
pinned_remove = _hot.pinned_remove

LEGACY: Any = _hot.stream_handle(0)  # the legacy default stream of the thread's current context


def devptr(value: Any) -> Any:
    """A device pointer handle from an int-like value (a DeviceAllocation, an int, numpy's intp)."""
    return value if COMPILED else _hot.devptr(int(value))


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
