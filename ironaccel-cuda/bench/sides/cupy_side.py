"""Peer: CuPy (cupy-cuda13x), its public API.

Kernel: `RawModule(path=<the shared CUBIN>)`, called as a `RawKernel` with numpy int32 scalars.
Copies: `ndarray.set(host)` and `ndarray.get(out=host)` on the null stream, each followed by
`Stream.null.synchronize()` (see `copy`). Pooled: `cupy.cuda.MemoryPool`.
Stream-ordered: `cupy.cuda.malloc_async` on the side's stream.
"""

from __future__ import annotations

import ctypes
import time

import numpy as np
from harness import Case

from sides.base import (
    BLOCK,
    GRID,
    MAX_THRESHOLD,
    BenchContext,
    CheckFailed,
    IpcImporter,
    Side,
    SideUnavailable,
    kernel_ints,
    kernel_name,
    set_default_pool_threshold,
)


class CupySide(Side):
    name = "cupy"
    label = "CuPy"

    def open(self, ctx: BenchContext) -> dict[str, str]:
        try:
            import cupy
        except ImportError as exc:
            raise SideUnavailable(f"CuPy is not installed ({exc})") from exc
        self.cp = cupy
        self.ctx = ctx
        cupy.cuda.Device(ctx.device).use()
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.module = cupy.RawModule(path=str(ctx.cubin_path))
        self.kernels = {n: self.module.get_function(kernel_name(n)) for n in (4, 16)}
        self.out = cupy.zeros(1, dtype=cupy.int32)
        self.args = {n: (self.out, *[np.int32(v) for v in kernel_ints(n)]) for n in (4, 16)}
        return {"cupy": cupy.__version__}

    def close(self) -> None:
        self.stream.synchronize()

    def _read_out(self) -> int:
        return int(self.out.get(stream=self.stream)[0])

    def _clear_out(self) -> None:
        self.out.fill(0)
        self.cp.cuda.Device().synchronize()

    def stream_sync(self) -> Case:
        stream = self.stream

        def run(n: int) -> None:
            for _ in range(n):
                stream.synchronize()

        return Case(run, note="cupy.cuda.Stream.synchronize()")

    def event_cycle(self) -> Case:
        Event, stream = self.cp.cuda.Event, self.stream

        def run(n: int) -> None:
            for _ in range(n):
                event = Event(block=False, disable_timing=True)
                event.record(stream)
                event.synchronize()
                del event  # cudaEventDestroy runs here (CPython frees at once)

        return Case(run, note="cupy.cuda.Event(disable_timing=True) + record + synchronize, freed at release")

    def event_reuse(self) -> Case:
        stream = self.stream
        event = self.cp.cuda.Event(block=False, disable_timing=True)

        def run(n: int) -> None:
            for _ in range(n):
                event.record(stream)
                event.synchronize()

        return Case(run, note="Event.record(stream) + Event.synchronize()")

    def stream_alloc(self, nbytes: int) -> Case:
        malloc_async, stream = self.cp.cuda.malloc_async, self.stream

        def run(n: int) -> None:
            with stream:
                for _ in range(n):
                    malloc_async(nbytes)  # freed (cudaFreeAsync on this stream) as the pointer is dropped

        def check() -> None:
            with stream:
                ptr = malloc_async(nbytes)
                ptr.memset_async(7, nbytes)
                del ptr
            stream.synchronize()

        return Case(run, settle=stream.synchronize, check=check, note="cupy.cuda.malloc_async")

    def pool_alloc(self, nbytes: int) -> Case:
        pool, stream = self.cp.cuda.MemoryPool(), self.stream

        def run(n: int) -> None:
            with stream:
                malloc = pool.malloc
                for _ in range(n):
                    malloc(nbytes)  # back to the pool as the pointer is dropped

        def check() -> None:
            with stream:
                ptr = pool.malloc(nbytes)
                if ptr.mem.size < nbytes:
                    raise CheckFailed(f"CuPy MemoryPool.malloc({nbytes}) gave {ptr.mem.size} bytes")
                del ptr
            stream.synchronize()

        def close() -> None:
            stream.synchronize()
            pool.free_all_blocks()

        return Case(run, settle=stream.synchronize, check=check, close=close, note="cupy.cuda.MemoryPool().malloc")

    def copy(self, direction: str, nbytes: int, pinned: bool) -> Case:
        cp, host = self.cp, self.ctx.host
        device = cp.empty(nbytes, dtype=cp.uint8)
        if pinned:
            memory = cp.cuda.alloc_pinned_memory(nbytes)
            view = np.frombuffer(memory, np.uint8, nbytes)
            view[:] = host.src[:nbytes]  # the array holds the pinned memory alive
        else:
            view = host.pageable(self.name, direction, nbytes)
        # Without a stream CuPy copies on the null stream: its fastest call here (the held-out H200 harness measured
        # ndarray.set at 14.4-14.8 GB/s pageable, twice the stream= form plus a synchronize).  From page-locked
        # memory that copy returns before the data has moved (seen on the H200: 7.7 us for 16 MiB),
        # so the null stream is synchronized after it, as a synchronous copy must be.
        null_sync = cp.cuda.Stream.null.synchronize
        if direction == "h2d":

            def run(n: int) -> None:
                put = device.set
                for _ in range(n):
                    put(view)
                    null_sync()

            def check() -> None:
                run(1)
                host.expect_equal(device.get(), nbytes, "CuPy h2d")

            return Case(run, check=check, note="ndarray.set(host) + Stream.null.synchronize(), preallocated array")

        def run_d2h(n: int) -> None:
            get = device.get
            for _ in range(n):
                get(out=view)
                null_sync()

        def check_d2h() -> None:
            device.set(host.src[:nbytes])
            null_sync()
            view[:] = np.bitwise_not(host.src[:nbytes])
            run_d2h(1)
            host.expect_equal(view, nbytes, "CuPy d2h")

        return Case(run_d2h, check=check_d2h, note="ndarray.get(out=host) + Stream.null.synchronize()")

    def copy_to_new(self, nbytes: int) -> Case:
        cp, host = self.cp, self.ctx.host
        device = cp.asarray(host.src[:nbytes])

        def run(n: int) -> None:
            get = device.get
            for _ in range(n):
                get()

        return Case(run, check=lambda: host.expect_equal(device.get(), nbytes, "CuPy d2h new"),
                    note="ndarray.get() (a new array, synchronous)")

    def launch(self, nargs: int) -> Case:
        kernel, args, stream = self.kernels[nargs], self.args[nargs], self.stream

        def run(n: int) -> None:
            for _ in range(n):
                kernel(GRID, BLOCK, args, stream=stream)

        return Case(run, settle=stream.synchronize, check=self.kernel_check(run, nargs),
                    note="RawKernel(grid, block, args, stream=s)")

    def eager_launches(self, count: int) -> Case:
        kernel, args, stream = self.kernels[4], self.args[4], self.stream

        def run(n: int) -> None:
            for _ in range(n):
                for _ in range(count):
                    kernel(GRID, BLOCK, args, stream=stream)
                stream.synchronize()

        return Case(run, check=self.kernel_check(run),
                    note="RawKernel(grid, block, args, stream=s) x N + Stream.synchronize()")

    def host_func(self) -> Case:
        stream, ran = self.stream, []

        def run(n: int) -> None:
            launch, sync = stream.launch_host_func, stream.synchronize
            for _ in range(n):
                launch(lambda arg: ran.append(arg), 1)
                sync()

        def check() -> None:
            ran.clear()
            run(3)
            if ran != [1, 1, 1]:
                raise AssertionError(f"host functions ran {len(ran)} times, not 3")

        return Case(run, check=check, note="cupy.cuda.Stream.launch_host_func(callback, arg) + synchronize")

    def graph_replay(self, count: int) -> Case:
        kernel, args, stream = self.kernels[4], self.args[4], self.stream
        with stream:
            stream.begin_capture()
            for _ in range(count):
                kernel(GRID, BLOCK, args, stream=stream)
            graph = stream.end_capture()

        def run(n: int) -> None:
            for _ in range(n):
                graph.launch(stream=stream)
                stream.synchronize()

        return Case(run, check=self.kernel_check(run),
                    note="Stream.begin_capture/end_capture; Graph.launch(stream) + Stream.synchronize()")

    # memory rows (issue 10)
    def pool_cycle(self, nbytes: int, raised: bool) -> Case:
        malloc_async, stream = self.cp.cuda.malloc_async, self.stream
        set_default_pool_threshold(self.ctx.device, MAX_THRESHOLD if raised else 0)

        def run(n: int) -> None:
            sync = stream.synchronize
            with stream:
                for _ in range(n):
                    malloc_async(nbytes)  # freed (cudaFreeAsync) as the pointer is dropped
                    sync()

        def close() -> None:
            stream.synchronize()
            set_default_pool_threshold(self.ctx.device, MAX_THRESHOLD)

        return Case(run, close=close, note="cupy.cuda.malloc_async + drop + Stream.synchronize; threshold set "
                    "through cuda.bindings (the same default pool)")

    def ipc_roundtrip(self, nbytes: int) -> Case:
        runtime = self.cp.cuda.runtime
        ptr = runtime.malloc(nbytes)  # cudaMalloc: what legacy IPC handles export
        importer = IpcImporter(ipc_importer, self.ctx.device)
        clock = time.perf_counter_ns

        def run(n: int) -> int:
            start = clock()
            for _ in range(n):
                handle = runtime.ipcGetMemHandle(ptr)
            took = clock() - start
            return took + importer.import_close(handle, n)

        def close() -> None:
            importer.close()
            runtime.free(ptr)

        return Case(run, close=close, note="runtime.ipcGetMemHandle; in the importer ipcOpenMemHandle + "
                    "ipcCloseMemHandle (legacy handles: CuPy has no pool IPC)")

    def grow_by_copy(self, nbytes: int) -> Case:
        cp, stream = self.cp, self.stream
        with stream:
            old = cp.full(nbytes, 3, dtype=cp.uint8)
        stream.synchronize()

        def run(n: int) -> None:
            with stream:
                for _ in range(n):
                    new = cp.empty(2 * nbytes, dtype=cp.uint8)
                    new[:nbytes] = old
                    stream.synchronize()
                    del new

        return Case(run, max_batch=64, note="cupy.empty(2 GiB) + new[:n] = old + synchronize (MemoryPool)")

    def managed_prefetch(self, nbytes: int) -> Case:
        cp, stream = self.cp, self.stream
        memory = cp.cuda.malloc_managed(nbytes)
        np.frombuffer((ctypes.c_uint8 * nbytes).from_address(memory.ptr), np.uint8)[:] = 1  # populated on the host
        prefetch = cp.cuda.runtime.memPrefetchAsync
        device, host = self.ctx.device, -1  # cudaCpuDeviceId

        def run(n: int) -> None:
            for _ in range(n):
                prefetch(memory.ptr, nbytes, device, stream.ptr)
                stream.synchronize()

        def settle() -> None:
            prefetch(memory.ptr, nbytes, host, stream.ptr)
            stream.synchronize()

        return Case(run, settle=settle, close=stream.synchronize, max_batch=1,
                    note="cupy.cuda.runtime.memPrefetchAsync(device) + synchronize on malloc_managed memory")


def ipc_importer(conn) -> None:
    """The importing process of the IPC row (spawned): opens and closes CuPy's legacy handles."""
    from sides.base import serve_ipc

    def setup(ordinal):
        import cupy

        cupy.cuda.Device(ordinal).use()
        runtime, clock = cupy.cuda.runtime, time.perf_counter_ns

        def run(handle, n):
            start = clock()
            for _ in range(n):
                runtime.ipcCloseMemHandle(runtime.ipcOpenMemHandle(handle))
            return clock() - start

        return run

    serve_ipc(conn, setup)
