"""The side under test: ironaccel_cuda through its public API only.

Every ironaccel_cuda name the benchmark relies on is used in this module and nowhere else, so an
API change is adapted here. Names used:
  Device(ordinal); Device.create_stream(); Stream.synchronize(); Device.create_event(timing=False);
  Event.record(stream), .synchronize(), .close(); Device.alloc(size, dtype, stream=s) -> DeviceBuf;
  DeviceBuf.close(), .copy_from(ndarray) and .copy_to_host(out=ndarray) (synchronous without a
  stream); Device.alloc_pinned(size, "uint8") -> PinnedBuf (.array, .close());
  Program(source).compile("cubin", arch="sm_XY") -> ObjectCode (.code); Device.load_module(code)
  .function(name) -> Function; Function.launch(grid, block, *args, stream=s, config=LaunchConfig(cluster=k));
  Function.prepare(grid, block, *args, stream=s) -> a callable PreparedLaunch; DeviceBuf.copy_to_host() (new array);
  Device.create_pool(stream=s) -> MemPool (.alloc(nbytes) -> DeviceBuf, .close());
  Stream.begin_capture() / .end_capture() -> Graph; Graph.instantiate() -> GraphExec
  (.launch(stream), .close()); the disk-cache folder variable IRONACCEL_CUDA_CACHE_DIR;
  the compiled core's file and ironaccel_cuda.transfer.settings() (how pageable copies
  were staged), both recorded with the versions. Memory rows: Device.default_pool.release_threshold,
  Device.create_driver_pool(ipc=True) -> DriverPool (.allocate, .close()), ipc.export(buf / pool),
  IpcPool.open(dev), IpcBuffer.without_pool() / .open(dev); Device.reserve -> VirtualBuffer (.resize, .view,
  .ptr, .nbytes, .close()); ManagedAllocator(dev).allocate, host_array, prefetch(buf, dev | "host", stream=s),
  managed_info; DeviceBuf[a:b] views, .memset(value, stream=s), .copy_from(buf, stream=s). While-graph and
  host-function rows: Program(source, CompileOptions(relocatable_device_code=True)), Linker(code,
  device_runtime=True).link(arch=dev), Graph(dev).add_conditional("while", default=1) -> ConditionalNode
  (.body.add_kernel(fn, grid, block, *args, after=node), .handle), Graph.instantiate(),
  Stream.launch_host_func(fn).
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
from harness import Case

from sides.base import (
    CLUSTER_GRID,
    KERNEL_SOURCE,
    MAX_THRESHOLD,
    NVRTC_SOURCE,
    WHILE_SOURCE,
    BenchContext,
    CheckFailed,
    IpcImporter,
    Side,
    SideUnavailable,
    kernel_ints,
    kernel_name,
    unique_source,
    written_out,
)

# Where ironaccel_cuda keeps its NVRTC disk cache (ironaccel_cuda.cache.ENV_CACHE_DIR).
CACHE_DIR_ENV = "IRONACCEL_CUDA_CACHE_DIR"
# Function.launch takes plain ints for a 1-D grid and block (its fast path); the same 1 x 32 threads as every side.
GRID, BLOCK = 1, 32


def prepare_environment(workdir: Path) -> None:
    """Point ironaccel's NVRTC disk cache at the run's scratch folder (before the first import)."""
    os.environ.setdefault(CACHE_DIR_ENV, str(workdir / "ironaccel-nvrtc-cache"))


def _import():  # -> module
    try:
        import ironaccel_cuda
    except ImportError as exc:
        raise SideUnavailable(f"ironaccel_cuda is not importable ({exc})") from exc
    return ironaccel_cuda


def _compile(ia, source: str, arch: str | None):  # -> ObjectCode
    """Program(source).compile("cubin") for sm_<arch>, or for the current device when arch is None."""
    program = ia.Program(source)
    return program.compile("cubin", arch=None if arch is None else f"sm_{arch}")


def fast_path_state(ia) -> str:
    """The compiled core in use (its file): ironaccel-cuda has one hot path, compiled."""
    spec = importlib.util.find_spec("ironaccel_cuda._core")
    origin = spec.origin if spec is not None and spec.origin else "missing"
    return f"compiled ({Path(origin).name})"


def staging_state() -> str:
    """How ironaccel stages pageable copies in this run (threads, chunk, slots, thresholds)."""
    try:
        from ironaccel_cuda import transfer
    except ImportError:
        return "?"
    cfg = transfer.settings()
    return (f"{cfg['threads']} copy threads, chunks up to {cfg['chunk'] >> 10} KiB "
            f"(1/{cfg.get('split', 32)} of a copy) in {cfg['slots']} page-locked slots from "
            f"{cfg['pipeline_min'] >> 10} KiB, non-temporal stores {cfg.get('nt', 0)}; "
            f"bounce buffer up to {cfg['bounce_max'] >> 10} KiB")


def disk_cached_compiler(cache_dir: Path, arch: str) -> Callable[[str], bytes]:
    """Compile through ironaccel's own caches, the disk cache placed in cache_dir (fresh-process NVRTC row).

    Sets the cache variable before the first import, so call it in a process that has not imported
    ironaccel_cuda yet."""
    os.environ[CACHE_DIR_ENV] = str(cache_dir)
    ia = _import()

    def compile_source(source: str) -> bytes:
        return _compile(ia, source, arch).code

    return compile_source


class _NoopLauncher:
    """Receives exactly the call a launch makes, and does nothing: the Python call's own cost."""

    def launch(self, grid, block, *args, stream=None, shared_mem=0):
        return None


class IronaccelSide(Side):
    name = "ironaccel"
    label = "ironaccel"

    def open(self, ctx: BenchContext) -> dict[str, str]:
        self.ia = ia = _import()
        self.ctx = ctx
        self.dev = ia.Device(ctx.device)
        self.stream = self.dev.create_stream()
        module = self.dev.load_module(_compile(ia, KERNEL_SOURCE, None))
        self.functions = {n: module.function(kernel_name(n)) for n in (4, 16)}
        self._module = module
        self.out = self.dev.alloc(1, "int32", stream=self.stream)
        self.stream.synchronize()
        self.args = {n: (self.out, *kernel_ints(n)) for n in (4, 16)}
        self._tokens = itertools.count()
        self._run_token = uuid.uuid4().hex
        return {"ironaccel-cuda": getattr(ia, "__version__", "?"), "ironaccel fast path": fast_path_state(ia),
                "ironaccel pageable copies": staging_state()}

    def close(self) -> None:
        self.stream.synchronize()
        self.out.close()
        self.stream.synchronize()

    def _read_out(self) -> int:
        self.stream.synchronize()
        return int(self.out.copy_to_host()[0])

    def _clear_out(self) -> None:
        self.stream.synchronize()
        self.out.copy_from(np.zeros(1, dtype=np.int32))

    # host-side hot paths
    def stream_sync(self) -> Case:
        stream = self.stream

        def run(n: int) -> None:
            sync = stream.synchronize
            for _ in range(n):
                sync()

        return Case(run, note="Stream.synchronize()")

    def event_cycle(self) -> Case:
        create, stream = self.dev.create_event, self.stream

        def run(n: int) -> None:
            for _ in range(n):
                event = create(timing=False)
                event.record(stream)
                event.synchronize()
                event.close()

        return Case(run, note="create_event(timing=False)")

    def event_reuse(self) -> Case:
        stream = self.stream
        event = self.dev.create_event(timing=False)

        def run(n: int) -> None:
            record, sync = event.record, event.synchronize
            for _ in range(n):
                record(stream)
                sync()

        return Case(run, close=event.close, note="Event.record(stream) + Event.synchronize()")

    def stream_alloc(self, nbytes: int) -> Case:
        alloc, stream = self.dev.alloc, self.stream

        def run(n: int) -> None:
            for _ in range(n):
                alloc(nbytes, "uint8", stream=stream).close()

        def check() -> None:
            buf = alloc(nbytes, "uint8", stream=stream)
            data = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
            buf.copy_from(data)
            if not np.array_equal(buf.copy_to_host(), data):
                raise CheckFailed(f"ironaccel: alloc({nbytes}) round trip differs")
            buf.close()
            stream.synchronize()

        return Case(run, settle=stream.synchronize, check=check, note="Device.alloc(stream=s) + close()")

    def pool_alloc(self, nbytes: int) -> Case:
        stream = self.stream
        pool = self.dev.create_pool(stream=stream)

        def run(n: int) -> None:
            alloc = pool.alloc
            for _ in range(n):
                alloc(nbytes).close()

        def check() -> None:
            buf = pool.alloc(nbytes)
            data = np.random.default_rng(nbytes + 1).integers(0, 256, nbytes, dtype=np.uint8)
            buf.copy_from(data)
            if not np.array_equal(buf.copy_to_host()[:nbytes], data):
                raise CheckFailed(f"ironaccel: MemPool.alloc({nbytes}) round trip differs")
            buf.close()
            stream.synchronize()

        def close() -> None:
            stream.synchronize()
            pool.close()

        return Case(run, settle=stream.synchronize, check=check, close=close, note="MemPool.alloc + close()")

    def copy(self, direction: str, nbytes: int, pinned: bool) -> Case:
        host = self.ctx.host
        buf = self.dev.alloc(nbytes, "uint8", stream=self.stream)
        self.stream.synchronize()
        owned = [buf]
        if pinned:
            pinned_buf = self.dev.alloc_pinned(nbytes, "uint8")
            owned.append(pinned_buf)
            view = pinned_buf.array
            view[:] = host.src[:nbytes]
        else:
            view = host.pageable(self.name, direction, nbytes)

        def close() -> None:
            self.stream.synchronize()
            for thing in owned:
                thing.close()

        if direction == "h2d":

            def run(n: int) -> None:
                put = buf.copy_from
                for _ in range(n):
                    put(view)

            def check() -> None:
                run(1)
                host.expect_equal(buf.copy_to_host(), nbytes, "ironaccel h2d")

            return Case(run, check=check, close=close, note="DeviceBuf.copy_from(array) (synchronous)")

        def run_d2h(n: int) -> None:
            get = buf.copy_to_host
            for _ in range(n):
                get(out=view)

        def check_d2h() -> None:
            buf.copy_from(np.ascontiguousarray(host.src[:nbytes]))
            view[:] = np.bitwise_not(host.src[:nbytes])
            run_d2h(1)
            host.expect_equal(view, nbytes, "ironaccel d2h")

        return Case(run_d2h, check=check_d2h, close=close, note="DeviceBuf.copy_to_host(out=array) (synchronous)")

    def copy_d2d(self, nbytes: int) -> Case:
        """dst.copy_from(src, stream=s); s.synchronize(): the compat benchmark's d2d row in ironaccel's own API."""
        host, stream = self.ctx.host, self.stream
        src = self.dev.alloc(nbytes, "uint8", stream=stream)
        dst = self.dev.alloc(nbytes, "uint8", stream=stream)

        def run(n: int) -> None:
            put, sync = dst.copy_from, stream.synchronize
            for _ in range(n):
                put(src, stream=stream)
                sync()

        def check() -> None:
            src.copy_from(np.ascontiguousarray(host.src[:nbytes]))
            dst.copy_from(np.zeros(nbytes, np.uint8))
            run(1)
            host.expect_equal(dst.copy_to_host(), nbytes, "ironaccel d2d")

        def close() -> None:
            stream.synchronize()
            src.close()
            dst.close()

        return Case(run, check=check, close=close, note="DeviceBuf.copy_from(DeviceBuf, stream=s) + Stream.synchronize")

    # launches
    def launch(self, nargs: int) -> Case:
        fn, args, stream = self.functions[nargs], self.args[nargs], self.stream
        run = written_out(fn.launch, (GRID, BLOCK, *args), stream=stream)
        return Case(run, settle=stream.synchronize, check=self.kernel_check(run, nargs),
                    note="Function.launch(grid, block, out, a, b, ..., stream=s), arguments written out")

    def launch_prepared(self, nargs: int) -> Case:
        prepared = self.functions[nargs].prepare(GRID, BLOCK, *self.args[nargs], stream=self.stream)
        stream = self.stream

        def run(n: int) -> None:
            for _ in range(n):
                prepared()

        return Case(run, settle=stream.synchronize, check=self.kernel_check(run, nargs),
                    note="p = Function.prepare(grid, block, *args, stream=s); p()")

    def launch_cluster(self, cluster: int) -> Case:
        fn, args, stream = self.functions[4], self.args[4], self.stream
        config = self.ia.LaunchConfig(cluster=cluster)
        run = written_out(fn.launch, (CLUSTER_GRID, BLOCK, *args), stream=stream, config=config)
        return Case(run, settle=stream.synchronize, check=self.kernel_check(run),
                    note="Function.launch(grid, block, out, a, b, c, stream=s, config=LaunchConfig(cluster=k)), "
                         "arguments written out")

    def copy_to_new(self, nbytes: int) -> Case:
        host = self.ctx.host
        buf = self.dev.alloc(nbytes, "uint8")
        buf.copy_from(np.ascontiguousarray(host.src[:nbytes]))

        def run(n: int) -> None:
            get = buf.copy_to_host
            for _ in range(n):
                get()

        def check() -> None:
            host.expect_equal(buf.copy_to_host(), nbytes, "ironaccel d2h new array")

        return Case(run, check=check, close=buf.close, note="DeviceBuf.copy_to_host() (a new array, synchronous)")

    def launch_call_overhead(self, nargs: int) -> Case:
        fn, args, stream = _NoopLauncher(), self.args[nargs], self.stream

        def run(n: int) -> None:
            launch = fn.launch
            for _ in range(n):
                launch(GRID, BLOCK, *args, stream=stream)

        return Case(run, note="a Python method that does nothing, called like Function.launch")

    def eager_launches(self, count: int) -> Case:
        fn, args, stream = self.functions[4], self.args[4], self.stream

        def run(n: int) -> None:
            launch, sync = fn.launch, stream.synchronize
            for _ in range(n):
                for _ in range(count):
                    launch(GRID, BLOCK, *args, stream=stream)
                sync()

        return Case(run, check=self.kernel_check(run), note="Function.launch(..., stream=s) x N + Stream.synchronize()")

    def graph_replay(self, count: int) -> Case:
        fn, args, stream = self.functions[4], self.args[4], self.stream
        stream.begin_capture()
        for _ in range(count):
            fn.launch(GRID, BLOCK, *args, stream=stream)
        graph = stream.end_capture()
        exe = graph.instantiate()

        def run(n: int) -> None:
            launch, sync = exe.launch, stream.synchronize
            for _ in range(n):
                launch(stream)
                sync()

        def close() -> None:
            for thing in (exe, graph):
                closer = getattr(thing, "close", None)
                if closer is not None:
                    closer()

        return Case(run, check=self.kernel_check(run), close=close,
                    note="Stream.begin_capture/end_capture; GraphExec.launch(s) + Stream.synchronize()")

    def conditional_while(self, count: int) -> Case:
        ia, dev, stream = self.ia, self.dev, self.stream
        code = ia.Program(WHILE_SOURCE, ia.CompileOptions(relocatable_device_code=True)).compile("cubin", arch=dev)
        module = dev.load_module(ia.Linker(code, device_runtime=True).link(arch=dev))
        work, countdown = module.function("bench_k4"), module.function("bench_countdown")
        left = dev.alloc(1, "int32", stream=stream)
        graph = ia.Graph(dev)
        loop = graph.add_conditional("while", default=1)
        step = loop.body.add_kernel(work, GRID, BLOCK, *self.args[4])
        loop.body.add_kernel(countdown, GRID, BLOCK, np.uint64(loop.handle), left, after=step)
        exe = graph.instantiate()
        start = np.array([count], np.int32)

        def run(n: int) -> None:
            launch, sync, reset = exe.launch, stream.synchronize, left.copy_from
            for _ in range(n):
                reset(start, stream=stream)
                launch(stream)
                sync()

        kernel_check = self.kernel_check(run)

        def check() -> None:
            kernel_check()
            if int(left.copy_to_host()[0]) != 0:
                raise AssertionError("the while-graph did not run its body count times")

        def close() -> None:
            for thing in (exe, graph, left, module):
                thing.close()

        return Case(run, check=check, close=close,
                    note=f"{count} iterations of one kernel in a conditional while node, reset with a 4-byte copy")

    def host_func(self) -> Case:
        stream, ran = self.stream, []
        callback = ran.append

        def run(n: int) -> None:
            launch, sync = stream.launch_host_func, stream.synchronize
            for _ in range(n):
                launch(lambda: callback(1))
                sync()

        def check() -> None:
            ran.clear()
            run(3)
            if ran != [1, 1, 1]:
                raise AssertionError(f"host functions ran {len(ran)} times, not 3")

        return Case(run, check=check, note="Stream.launch_host_func(callable) + synchronize")

    # NVRTC
    def nvrtc_cold(self) -> Case:
        ia, arch = self.ia, self.ctx.arch

        def run(n: int) -> None:
            for _ in range(n):
                _compile(ia, unique_source(next(self._tokens), self._run_token), arch)

        return Case(run, check=self._check_compile, max_batch=64, note="new source each time: misses every cache")

    def nvrtc_memory_hit(self) -> Case:
        ia, arch = self.ia, self.ctx.arch

        def run(n: int) -> None:
            for _ in range(n):
                _compile(ia, NVRTC_SOURCE, arch)

        return Case(run, check=self._check_compile, note="same source again: in-memory cache")

    def _check_compile(self) -> None:
        code = _compile(self.ia, NVRTC_SOURCE, self.ctx.arch).code
        if not code.startswith(b"\x7fELF"):
            raise CheckFailed("ironaccel: Program.compile('cubin') did not give an ELF cubin")

    # memory rows (issue 10)
    def pool_cycle(self, nbytes: int, raised: bool) -> Case:
        pool, alloc, stream = self.dev.default_pool, self.dev.alloc, self.stream
        pool.release_threshold = MAX_THRESHOLD if raised else 0

        def run(n: int) -> None:
            sync = stream.synchronize
            for _ in range(n):
                alloc(nbytes, "uint8", stream=stream).close()
                sync()

        def check() -> None:
            buf = alloc(nbytes, "uint8", stream=stream)
            buf.memset(7, stream=stream)
            if int(buf[:1].copy_to_host()[0]) != 7:
                raise CheckFailed("ironaccel: default-pool buffer did not hold a memset")
            buf.close()
            stream.synchronize()

        def close() -> None:
            stream.synchronize()
            pool.release_threshold = MAX_THRESHOLD

        return Case(run, check=check, close=close,
                    note="Device.alloc(stream=s).close() + Stream.synchronize(); threshold via "
                         "dev.default_pool.release_threshold")

    def ipc_roundtrip(self, nbytes: int) -> Case:
        ipc = self.ia.ipc
        pool = self.dev.create_driver_pool(ipc=True)
        buf = pool.allocate(nbytes, "uint8", stream=self.stream)
        buf.memset(5, stream=self.stream)
        self.stream.synchronize()
        importer = IpcImporter(ipc_importer, (ipc.export(pool), self.ctx.device))
        export = ipc.export
        clock = time.perf_counter_ns

        def run(n: int) -> int:
            start = clock()
            for _ in range(n):
                desc = export(buf).without_pool()  # 64 bytes and a key: the importer opened the pool once
            took = clock() - start
            return took + importer.import_close(desc, n)

        def check() -> None:
            if importer.request(("run", (export(buf), True), 1)) != 5:
                raise CheckFailed("ironaccel: the importer did not read the exported bytes")

        def close() -> None:
            importer.close()
            buf.close()
            pool.close()

        return Case(run, check=check, close=close, note="ipc.export(buf).without_pool() (the descriptor is made once "
                    "and kept on the buffer, as cuda.core's Buffer.ipc_descriptor keeps its own); in the importer "
                    "desc.open().close() (its pool opened once: IpcPool.open())")

    def grow_in_place(self, nbytes: int, steps: int) -> Case:
        vb = self.dev.reserve((steps + 1) * nbytes)
        vb.resize(nbytes)
        vb.view("uint8")[:16].copy_from(np.arange(16, dtype=np.uint8))

        def run(n: int) -> None:
            resize, size = vb.resize, vb.nbytes
            for _ in range(n):
                size += nbytes
                resize(size)

        def settle() -> None:
            vb.resize(nbytes)

        def check() -> None:
            ptr = vb.ptr
            run(1)
            head = vb.view("uint8")[:16].copy_to_host()
            settle()
            if vb.ptr != ptr or not np.array_equal(head, np.arange(16, dtype=np.uint8)):
                raise CheckFailed("ironaccel: growing moved the buffer or lost its data")

        return Case(run, settle=settle, check=check, close=vb.close, max_batch=steps,
                    note="VirtualBuffer.resize(size + 1 GiB) (dev.reserve); shrinking back is untimed")

    def grow_by_copy(self, nbytes: int) -> Case:
        stream = self.stream
        old = self.dev.alloc(nbytes, "uint8", stream=stream)
        old.memset(3, stream=stream)
        stream.synchronize()

        def run(n: int) -> None:
            alloc, sync = self.dev.alloc, stream.synchronize
            for _ in range(n):
                new = alloc(2 * nbytes, "uint8", stream=stream)
                new[:nbytes].copy_from(old, stream=stream)
                sync()
                new.close()

        def check() -> None:
            new = self.dev.alloc(2 * nbytes, "uint8", stream=stream)
            new[:nbytes].copy_from(old, stream=stream)
            stream.synchronize()
            if int(new[nbytes - 1:nbytes].copy_to_host()[0]) != 3:
                raise CheckFailed("ironaccel: the copy into the bigger buffer is wrong")
            new.close()

        def close() -> None:
            stream.synchronize()
            old.close()

        return Case(run, check=check, close=close, max_batch=64,
                    note="Device.alloc(2 GiB) + copy_from(old, stream=s) + synchronize + close()")

    def managed_prefetch(self, nbytes: int) -> Case:
        ia, dev, stream = self.ia, self.dev, self.stream
        buf = ia.ManagedAllocator(dev).allocate(nbytes, "uint8", stream=stream)
        ia.host_array(buf)[:] = 1  # populated on the host

        def run(n: int) -> None:
            for _ in range(n):
                ia.prefetch(buf, dev, stream=stream)
                stream.synchronize()

        def settle() -> None:
            ia.prefetch(buf, "host", stream=stream)
            stream.synchronize()

        def check() -> None:
            run(1)
            if ia.managed_info(buf).last_prefetch_location != dev.ordinal:
                raise CheckFailed("ironaccel: the prefetch did not reach the device")
            settle()

        return Case(run, settle=settle, check=check, close=buf.close, max_batch=1,
                    note="prefetch(buf, dev, stream=s) + synchronize; back to the host between batches, untimed")


def ipc_importer(conn) -> None:
    """The importing process of the IPC row (spawned): opens the exporter's pool once, then buffers."""
    from sides.base import serve_ipc

    def setup(payload):
        import ironaccel_cuda as cu

        pool_desc, ordinal = payload
        dev = cu.Device(ordinal)
        pool = pool_desc.open(dev)  # held while the importer runs: each buffer import reuses it
        clock = time.perf_counter_ns

        def run(desc, n):
            if isinstance(desc, tuple):  # the check: read the first byte back
                buf = desc[0].open(dev)
                value = int(buf[:1].copy_to_host()[0])
                buf.close()
                return value
            assert not pool.closed
            start = clock()
            for _ in range(n):
                desc.open(dev).close()
            return clock() - start

        return run

    serve_ipc(conn, setup)
