"""What the child processes of test_ipc.py run (a module, so `multiprocessing`'s spawn can import it).

Each child reports on its connection: ("ok", ...) or ("error", text); nothing it does may hang the parent,
so every wait on the parent has a timeout.
"""

from __future__ import annotations

import traceback
from typing import Any

import numpy as np

TIMEOUT = 60


def _guard(conn: Any, body: Any) -> None:
    try:
        body()
    except BaseException:
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


def _wait(conn: Any, expected: str) -> None:
    if not conn.poll(TIMEOUT):
        raise TimeoutError(f"the parent never said {expected!r}")
    got = conn.recv()
    if got != expected:
        raise AssertionError(f"expected {expected!r} from the parent, got {got!r}")


def check_and_write(desc: Any, expect_first: float, value: float, conn: Any) -> None:
    """Map the parent's buffer; report its first element and sum; fill it with `value`; open it twice."""

    def body() -> None:
        buf = desc.open()
        seen = buf.copy_to_host()
        twice = desc.open()  # a second mapping of the same memory: its own DeviceBuf
        buf.memset(value)
        buf.device.synchronize()
        via_second = float(twice.copy_to_host()[-1])
        buf.close()
        still = float(twice.copy_to_host()[0])  # closing one mapping leaves the other
        twice.close()
        conn.send(("ok", float(seen[0]), float(seen.sum()), via_second, still, seen.size == desc.size,
                   float(expect_first)))

    _guard(conn, body)


def export_to_parent(n: int, conn: Any) -> None:
    """Allocate from an IPC pool, fill with 0..n-1, send the descriptor; after the parent wrote, check its writes."""

    def body() -> None:
        import ironaccel_cuda as cu

        dev = cu.Device(0)
        pool = dev.create_driver_pool(ipc=True)
        buf = pool.allocate(n, "float32")
        buf.copy_from(np.arange(n, dtype=np.float32))
        conn.send(("desc", cu.ipc.export(buf)))
        _wait(conn, "written")
        back = buf.copy_to_host()
        used = pool.usage().used
        buf.close()
        pool.close()
        conn.send(("ok", float(back.min()), float(back.max()), used))

    _guard(conn, body)


def record_after_work(buf_desc: Any, event_desc: Any, value: float, cycles: int, conn: Any) -> None:
    """Queue a long kernel, then a fill of the parent's buffer, then record the parent's event; say so at once."""

    def body() -> None:
        import ironaccel_cuda as cu
        from helpers.kernels import SOURCE

        buf = buf_desc.open()
        event = event_desc.open()
        dev = buf.device
        spin = dev.load_module(cu.Program(SOURCE).compile()).function("spin")
        s = dev.create_stream()
        spin.launch(1, 1, np.int64(cycles), stream=s)
        buf.memset(value, stream=s)
        event.record(s)
        conn.send(("recorded",))
        _wait(conn, "done")
        s.synchronize()
        event.close()
        buf.close()
        s.close()
        conn.send(("ok",))

    _guard(conn, body)


def outlive_exporter(desc: Any, value: float, conn: Any) -> None:
    """Map the buffer, wait until the exporter closed it (and its pool), then write, read back and close."""

    def body() -> None:
        buf = desc.open()
        buf.device.synchronize()
        conn.send(("mapped",))
        _wait(conn, "exporter closed")
        buf.memset(value)
        back = buf.copy_to_host()
        buf.close()
        conn.send(("ok", float(back.min()), float(back.max())))

    _guard(conn, body)


def over_socket(sock: Any, value: float, conn: Any) -> None:
    """Receive a descriptor with ipc.recv (its fd as SCM_RIGHTS), fill the buffer, answer on the socket."""

    def body() -> None:
        import ironaccel_cuda as cu

        desc = cu.ipc.recv(sock)
        buf = desc.open()
        buf.memset(value)
        buf.device.synchronize()
        buf.close()
        cu.ipc.send(sock, ("filled", desc.size))
        conn.send(("ok",))

    _guard(conn, body)


def open_expecting(desc: Any, conn: Any) -> None:
    """Open `desc` and report the typed error it raises (or that it opened)."""

    def body() -> None:
        from ironaccel import IronAccelError

        try:
            buf = desc.open()
        except IronAccelError as exc:
            conn.send(("ok", type(exc).__name__, exc.op))
            return
        buf.close()
        conn.send(("ok", "opened", None))

    _guard(conn, body)


def open_past_the_end(bad: Any, good: Any, conn: Any) -> None:
    """Open `bad` (an offset past its allocation): report the typed error and the imports left counted; then
    open `good`, the same allocation's true descriptor, and report its first element."""

    def body() -> None:
        import ironaccel_cuda as cu
        from ironaccel import IronAccelError

        try:
            bad.open().close()
            error: Any = ("opened", None, "")
        except IronAccelError as exc:
            error = (type(exc).__name__, exc.op, str(exc))
        counted = cu.ipc._imports.count()
        buf = good.open()
        first = float(buf.copy_to_host()[0])
        buf.close()
        conn.send(("ok", *error, counted, first, cu.ipc._imports.count()))

    _guard(conn, body)


def open_without_pool(pool_desc: Any, descs: Any, conn: Any) -> None:
    """Try a without_pool() descriptor before its pool is open here (the typed error), then open the pool and
    every descriptor; report the error's type and each buffer's first element."""

    def body() -> None:
        from ironaccel import InvalidState

        try:
            descs[0].open().close()
            error = "opened"
        except InvalidState:
            error = "InvalidState"
        pool = pool_desc.open()
        values = []
        for d in descs:
            buf = d.open()
            values.append(float(buf.copy_to_host()[0]))
            buf.close()
        pool.close()
        conn.send(("ok", error, values))

    _guard(conn, body)


def release_inside_the_section(desc: Any, conn: Any) -> None:
    """Close one of two mappings of `desc` while this thread is inside the import bookkeeping's section, as a
    collection there would: the release waits for the section's end instead of deadlocking on its lock.  Report
    the mapping count and the queue inside, the count after, what the other mapping reads, and the pools left."""

    def body() -> None:
        from ironaccel_cuda import ipc

        imports = ipc._imports
        first, second = desc.open(), desc.open()
        key = desc.pool.key
        base = imports._bases[(key, desc.handle)][0]
        imports._enter()
        try:
            first.close()  # queued: this thread is in the section
            inside = (imports._maps[(key, base)], len(imports._queued))
        finally:
            imports._leave()
        after = imports._maps[(key, base)]
        value = float(second.copy_to_host()[0])
        second.close()
        conn.send(("ok", inside, after, value, (key, base) in imports._maps, imports.count()))

    _guard(conn, body)


def open_raw_handles(mem: bytes, event: bytes, n: int, value: float, conn: Any) -> None:
    """Open the parent's legacy memory and event handles by address in this process's current context (ipc's
    handle functions): wait for the event, report the first element and sum, fill with `value`, close."""

    def body() -> None:
        from cuda.bindings import driver

        import ironaccel_cuda as cu
        from ironaccel_cuda.memory import adopt

        dev = cu.Device(0)
        dev.bind()
        h = cu.ipc.open_event_handle(event)
        (err,) = driver.cuEventSynchronize(h)  # the parent recorded it after its fill
        assert not err, err
        ptr = cu.ipc.open_memory_handle(mem)
        view = adopt(ptr, n, "float32", dev)
        seen = view.copy_to_host()
        view.memset(value)
        dev.synchronize()
        view.close()  # a view: frees nothing
        cu.ipc.close_memory_handle(ptr)
        (err,) = driver.cuEventDestroy(h)
        assert not err, err
        conn.send(("ok", float(seen[0]), float(seen.sum())))

    _guard(conn, body)
