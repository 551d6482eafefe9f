"""What the child processes of test_compat_cuda_core_ipc.py run (a module, so multiprocessing's spawn can import it).

The compat objects arrive pickled (their classes live in ironaccel_cuda_compat.cuda_core, so no install() is
needed).  Each child reports on its connection: ("ok", ...) or ("error", text).
"""

from __future__ import annotations

import pickle
import traceback
from typing import Any

TIMEOUT = 60


def _guard(conn: Any, body: Any) -> None:
    try:
        body()
    except BaseException:
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


def fill_sent_buffer(mr: Any, buf: Any, value: int, conn: Any) -> None:
    """`mr` and `buf` came as Process arguments: fill the buffer with `value`; report what the child saw."""

    def body() -> None:
        from ironaccel_cuda_compat import cuda_core as cc

        dev = cc.Device(0)
        dev.set_current()
        seen = (mr.is_mapped, buf.is_mapped, buf.memory_resource is mr, buf.size, str(mr.uuid))
        refused = ""
        try:
            mr.allocate(64, stream=dev.default_stream)
        except TypeError as exc:
            refused = str(exc)
        buf.fill(value, stream=dev.default_stream)
        dev.default_stream.sync()
        buf.close()
        mr.close()
        conn.send(("ok", *seen, refused))

    _guard(conn, body)


def copy_then_close(mr: Any, buffers: Any, value: int, conn: Any) -> None:
    """Fill each sent buffer by a copy on a stream of the child's own, from managed memory, and close the buffer
    at once, without waiting (as cuda.core's memory_ipc tests do): the unmap must not overtake the copy."""

    def body() -> None:
        import ctypes

        from cuda.bindings import driver

        from ironaccel_cuda_compat import cuda_core as cc

        dev = cc.Device(0)
        dev.set_current()
        s = dev.create_stream()
        size = buffers[0].size
        err, ptr = driver.cuMemAllocManaged(size, driver.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL.value)
        assert not err, err
        ctypes.memset(int(ptr), value, size)
        pattern = cc.Buffer.from_handle(int(ptr), size)
        for buf in buffers:
            buf.copy_from(pattern, stream=s)
            buf.close()
        s.sync()
        (err,) = driver.cuMemFree(ptr)
        assert not err, err
        conn.send(("ok",))

    _guard(conn, body)


def import_twice(mr: Any, desc: Any, other: Any, oversized: Any, conn: Any) -> None:
    """Import one descriptor twice (one mapping, shared) and another buffer of the same pool, close them; an
    oversized descriptor is refused (ValueError)."""

    def body() -> None:
        from ironaccel_cuda_compat import cuda_core as cc

        dev = cc.Device(0)
        dev.set_current()
        first = cc.Buffer.from_ipc_descriptor(mr, desc, stream=dev.default_stream)
        second = cc.Buffer.from_ipc_descriptor(mr, desc, stream=dev.default_stream)
        third = cc.Buffer.from_ipc_descriptor(mr, other, stream=dev.default_stream)
        same = int(first.handle) == int(second.handle) != int(third.handle)
        first.close()
        second.close()
        third.close()
        try:
            cc.Buffer.from_ipc_descriptor(mr, oversized, stream=dev.default_stream)
            refused = "imported"
        except ValueError as exc:
            refused = str(exc)
        dev.sync()
        conn.send(("ok", same, refused))

    _guard(conn, body)


def import_checked(alloc_handle: Any, oversized: Any, truncated: Any, conn: Any) -> None:
    """Map the pool by its allocation handle; both bad descriptors must be refused with ValueError."""

    def body() -> None:
        from ironaccel_cuda_compat import cuda_core as cc

        dev = cc.Device(0)
        dev.set_current()
        mr = cc.DeviceMemoryResource.from_allocation_handle(dev, alloc_handle)
        messages = []
        for desc in (oversized, truncated):
            try:
                cc.Buffer.from_ipc_descriptor(mr, desc, stream=dev.default_stream)
                messages.append("imported")
            except ValueError as exc:
                messages.append(str(exc))
        mr.close()
        conn.send(("ok", *messages))

    _guard(conn, body)


def unpickle_before_and_after_registering(alloc_handle: Any, pickled: bytes, value: int, conn: Any) -> None:
    """A plainly pickled Buffer needs its resource registered here first: try before, map, try again, fill."""

    def body() -> None:
        from ironaccel_cuda_compat import cuda_core as cc

        dev = cc.Device(0)
        dev.set_current()
        before = ""
        try:
            pickle.loads(pickled)
        except RuntimeError as exc:
            before = str(exc)
        mr = cc.DeviceMemoryResource.from_allocation_handle(dev, alloc_handle)
        buf = pickle.loads(pickled)
        same = buf.memory_resource is mr and cc.DeviceMemoryResource.from_registry(mr.uuid) is mr
        buf.fill(value, stream=dev.default_stream)
        dev.default_stream.sync()
        buf.close()
        mr.close()
        conn.send(("ok", before, same))

    _guard(conn, body)


def report_event(conn: Any) -> None:
    """Receive an IPC event on `conn` (once a context is current here): report its properties; wait on it."""

    def body() -> None:
        from ironaccel_cuda_compat import cuda_core as cc

        dev = cc.Device(0)
        dev.set_current()
        if not conn.poll(TIMEOUT):
            raise TimeoutError("the parent sent no event")
        event = conn.recv()
        s = dev.create_stream()
        s.wait(event)
        s.sync()
        conn.send(("ok", event.ipc_descriptor, event.is_ipc_enabled, event.is_timing_enabled,
                   event.is_blocking_sync, event.device, event.context))

    _guard(conn, body)
