"""The ironaccel hot-path functions this package calls, named in one place.

Every hot call of the PyCUDA surface (allocation, copies, memsets, launches,
stream and event waits) goes straight to `ironaccel_cuda._core` -- compiled C
calling the driver through function pointers -- never through `cuda.bindings`
from Python.  Its handles (contexts, streams, events, functions, device
pointers) are plain ints, so callers pass addresses and `int(handle)` through
unconverted.
"""

from __future__ import annotations

from ironaccel_cuda import _core

bind = _core.bind
ensure = _core.ensure
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
memcpy_dtoh_sync = _core.memcpy_dtoh_sync
HtodRing = _core.HtodRing
memcpy_dtod = _core.memcpy_dtod
memset_d8 = _core.memset_d8
memset_d16 = _core.memset_d16
memset_d32 = _core.memset_d32
launch = _core.launch
pinned_add = _core.pinned_add
pinned_remove = _core.pinned_remove

LEGACY = 0  # the legacy default stream of the thread's current context
NO_CONTEXT = 0  # what `bind` takes to unbind every context from this thread (cuCtxSetCurrent(NULL))
