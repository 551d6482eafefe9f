"""Peer: NVIDIA's cuda.core (1.x), its public API used the way its documentation shows.

The kernel is loaded from the same CUBIN bytes as the raw side (`ObjectCode.from_cubin`).
cuda.core has no host-array copy API, so its transfer cells stay blank.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
from harness import Case

from sides.base import (
    BLOCK,
    CLUSTER_GRID,
    GRID,
    MAX_THRESHOLD,
    NVRTC_SOURCE,
    BenchContext,
    CheckFailed,
    IpcImporter,
    Side,
    SideUnavailable,
    Unsupported,
    kernel_ints,
    kernel_name,
    set_default_pool_threshold,
    unique_source,
    written_out,
)


def _import_core():  # -> module
    try:
        import cuda.core as core
    except ImportError as exc:
        raise SideUnavailable(f"cuda.core is not installed ({exc})") from exc
    return core


def disk_cached_compiler(cache_dir: Path, arch: str) -> Callable[[str], bytes]:
    """Compile through cuda.core's FileStreamProgramCache (for the fresh-process NVRTC row)."""
    core = _import_core()
    from cuda.core.utils import FileStreamProgramCache

    cache = FileStreamProgramCache(cache_dir)
    options = core.ProgramOptions(arch=f"sm_{arch}")

    def compile_source(source: str) -> bytes:
        program = core.Program(source, "c++", options)
        try:
            return bytes(program.compile("cubin", cache=cache).code)
        finally:
            program.close()

    return compile_source


class CudaCoreSide(Side):
    name = "cuda.core"
    label = "cuda.core"

    def open(self, ctx: BenchContext) -> dict[str, str]:
        core = _import_core()
        self.core = core
        self.ctx = ctx
        self.dev = core.Device(ctx.device)
        self.dev.set_current()
        self.stream = self.dev.create_stream()  # non-blocking by default
        self.event_options = core.EventOptions(timing_enabled=False, blocking_sync=False)
        self.object_code = core.ObjectCode.from_cubin(ctx.cubin)
        self.kernels = {n: self.object_code.get_kernel(kernel_name(n)) for n in (4, 16)}
        self.config = core.LaunchConfig(grid=GRID, block=BLOCK)
        self.out = self.dev.allocate(4, stream=self.stream)
        self.args = {n: (self.out, *[np.int32(v) for v in kernel_ints(n)]) for n in (4, 16)}
        self.options = core.ProgramOptions(arch=f"sm_{ctx.arch}")
        self._tokens = itertools.count()
        self._run_token = uuid.uuid4().hex
        return {"cuda-core": getattr(core, "__version__", "?")}

    def close(self) -> None:
        self.out.close(self.stream)
        self.stream.sync()
        self.stream.close()

    def _read_out(self) -> int:
        from cuda.bindings import driver

        self.stream.sync()
        host = np.zeros(1, dtype=np.int32)
        (err,) = driver.cuMemcpyDtoH(host.ctypes.data, int(self.out.handle), 4)
        if err:
            raise RuntimeError(f"cuMemcpyDtoH failed: {err!r}")
        return int(host[0])

    def _clear_out(self) -> None:
        self.out.fill(0, stream=self.stream)
        self.stream.sync()

    def stream_sync(self) -> Case:
        stream = self.stream

        def run(n: int) -> None:
            for _ in range(n):
                stream.sync()

        return Case(run, note="Stream.sync()")

    def event_cycle(self) -> Case:
        dev, stream, options = self.dev, self.stream, self.event_options

        def run(n: int) -> None:
            for _ in range(n):
                event = dev.create_event(options)
                stream.record(event)
                event.sync()
                event.close()

        return Case(run, note="Device.create_event + Stream.record + Event.sync + Event.close")

    def event_reuse(self) -> Case:
        stream = self.stream
        event = self.dev.create_event(self.event_options)

        def run(n: int) -> None:
            for _ in range(n):
                stream.record(event)
                event.sync()

        return Case(run, close=event.close, note="Stream.record(event) + Event.sync()")

    def stream_alloc(self, nbytes: int) -> Case:
        dev, stream = self.dev, self.stream

        def run(n: int) -> None:
            for _ in range(n):
                dev.allocate(nbytes, stream=stream).close(stream)

        def check() -> None:
            buf = dev.allocate(nbytes, stream=stream)
            if buf.size != nbytes:
                raise CheckFailed(f"cuda.core: allocate({nbytes}) gave {buf.size} bytes")
            buf.fill(7, stream=stream)
            buf.close(stream)
            stream.sync()

        return Case(run, settle=stream.sync, check=check, note="Device.allocate (its memory pool) + Buffer.close")

    def pool_alloc(self, nbytes: int) -> Case:
        case = self.stream_alloc(nbytes)
        case.note = "Device.allocate: cuda.core's pool is the driver's stream-ordered pool"
        return case

    def launch(self, nargs: int) -> Case:
        launch, stream, config = self.core.launch, self.stream, self.config
        kernel, args = self.kernels[nargs], self.args[nargs]
        run = written_out(launch, (stream, config, kernel, *args))
        return Case(run, settle=stream.sync, check=self.kernel_check(run, nargs),
                    note="launch(stream, config, kernel, out, a, b, ...), arguments written out")

    def launch_cluster(self, cluster: int) -> Case:
        launch, stream, kernel, args = self.core.launch, self.stream, self.kernels[4], self.args[4]
        config = self.core.LaunchConfig(grid=CLUSTER_GRID, cluster=cluster, block=BLOCK)
        run = written_out(launch, (stream, config, kernel, *args))
        return Case(run, settle=stream.sync, check=self.kernel_check(run),
                    note="launch(stream, LaunchConfig(grid, cluster=k, block), kernel, out, a, b, c), arguments "
                         "written out")

    def eager_launches(self, count: int) -> Case:
        launch, stream, config = self.core.launch, self.stream, self.config
        kernel, args = self.kernels[4], self.args[4]

        def run(n: int) -> None:
            for _ in range(n):
                for _ in range(count):
                    launch(stream, config, kernel, *args)
                stream.sync()

        return Case(run, check=self.kernel_check(run), note="launch(stream, config, kernel, *args) x N + Stream.sync()")

    def graph_replay(self, count: int) -> Case:
        launch, stream, config = self.core.launch, self.stream, self.config
        kernel, args = self.kernels[4], self.args[4]
        builder = stream.create_graph_builder()
        builder.begin_building()
        for _ in range(count):
            launch(builder, config, kernel, *args)
        builder.end_building()
        graph = builder.complete()
        graph.upload(stream)

        def run(n: int) -> None:
            for _ in range(n):
                graph.launch(stream)
                stream.sync()

        def close() -> None:
            graph.close()
            builder.close()

        return Case(run, check=self.kernel_check(run), close=close,
                    note="GraphBuilder; Graph.launch(stream) + Stream.sync()")

    def nvrtc_cold(self) -> Case:
        core, options = self.core, self.options

        def run(n: int) -> None:
            for _ in range(n):
                program = core.Program(unique_source(next(self._tokens), self._run_token), "c++", options)
                program.compile("cubin")
                program.close()

        return Case(run, check=self._check_compile, max_batch=64, note="Program.compile, no cache")

    def nvrtc_memory_hit(self) -> Case:
        from cuda.core.utils import InMemoryProgramCache

        core, options = self.core, self.options
        cache = InMemoryProgramCache()

        def run(n: int) -> None:
            for _ in range(n):
                program = core.Program(NVRTC_SOURCE, "c++", options)
                program.compile("cubin", cache=cache)
                program.close()

        return Case(run, check=self._check_compile, note="Program.compile(cache=InMemoryProgramCache())")

    def _check_compile(self) -> None:
        program = self.core.Program(NVRTC_SOURCE, "c++", self.options)
        code = bytes(program.compile("cubin").code)
        program.close()
        if not code.startswith(b"\x7fELF"):
            raise CheckFailed("cuda.core: Program.compile('cubin') did not give an ELF cubin")

    # memory rows (issue 10)
    def pool_cycle(self, nbytes: int, raised: bool) -> Case:
        dev, stream = self.dev, self.stream
        set_default_pool_threshold(self.ctx.device, MAX_THRESHOLD if raised else 0)

        def run(n: int) -> None:
            for _ in range(n):
                dev.allocate(nbytes, stream=stream).close(stream)
                stream.sync()

        def close() -> None:
            stream.sync()
            set_default_pool_threshold(self.ctx.device, MAX_THRESHOLD)

        return Case(run, close=close, note="Device.allocate(stream=s).close(s) + Stream.sync(); threshold set "
                    "through cuda.bindings (the same default pool)")

    def ipc_roundtrip(self, nbytes: int) -> Case:
        core = self.core
        options_cls = getattr(core, "DeviceMemoryResourceOptions", None)
        if options_cls is None or not hasattr(core.Buffer, "from_ipc_descriptor"):
            raise Unsupported("this cuda.core has no IPC-enabled DeviceMemoryResource")
        mr = core.DeviceMemoryResource(self.dev, options_cls(ipc_enabled=True, max_size=64 << 20))
        buf = mr.allocate(nbytes, stream=self.stream)
        self.stream.sync()
        # cuda.core 1.2: the `allocation_handle` property (get_allocation_handle() before it)
        handle = mr.allocation_handle if hasattr(mr, "allocation_handle") else mr.get_allocation_handle()
        importer = IpcImporter(ipc_importer, (handle, self.ctx.device))
        clock = time.perf_counter_ns

        # cuda.core 1.2: the `ipc_descriptor` property (get_ipc_descriptor() before it; the H200 run of
        # lost this cell to an AttributeError on 1.2)
        def export() -> object:
            return buf.ipc_descriptor

        if not hasattr(type(buf), "ipc_descriptor"):
            export = buf.get_ipc_descriptor

        def run(n: int) -> int:
            start = clock()
            for _ in range(n):
                desc = export()
            took = clock() - start
            return took + importer.import_close(desc, n)

        def close() -> None:
            importer.close()
            buf.close(self.stream)
            self.stream.sync()
            mr.close()

        return Case(run, close=close, note="Buffer.ipc_descriptor; in the importer "
                    "Buffer.from_ipc_descriptor(mr, desc, stream=s).close() + s.sync() (the memory resource imported "
                    "once)")

    def grow_in_place(self, nbytes: int, steps: int) -> Case:
        vmr = getattr(self.core, "VirtualMemoryResource", None)
        if vmr is None or not hasattr(vmr, "modify_allocation"):
            raise Unsupported("this cuda.core has no VirtualMemoryResource.modify_allocation")
        mr = vmr(self.dev)
        state = {"buf": mr.allocate(nbytes)}

        def run(n: int) -> None:
            for _ in range(n):
                state["buf"] = mr.modify_allocation(state["buf"], state["buf"].size + nbytes)

        def settle() -> None:
            state["buf"].close()
            state["buf"] = mr.allocate(nbytes)

        return Case(run, settle=settle, close=lambda: state["buf"].close(), max_batch=steps,
                    note="VirtualMemoryResource.modify_allocation(buf, size + 1 GiB)")

    def managed_prefetch(self, nbytes: int) -> Case:
        core, stream = self.core, self.stream
        managed = getattr(core, "managed_memory", None)
        resource = getattr(core, "ManagedMemoryResource", None)
        if managed is None or resource is None or not hasattr(managed, "prefetch"):
            raise Unsupported("this cuda.core has no managed_memory.prefetch")
        buf = resource().allocate(nbytes, stream=stream)
        stream.sync()

        def run(n: int) -> None:
            for _ in range(n):
                managed.prefetch(buf, self.dev, stream=stream)
                stream.sync()

        def settle() -> None:
            managed.prefetch(buf, -1, stream=stream)  # -1: the host
            stream.sync()

        return Case(run, settle=settle, close=lambda: buf.close(stream), max_batch=1,
                    note="managed_memory.prefetch(buf, device, stream=s) + sync")


def ipc_importer(conn) -> None:
    """The importing process of the IPC row (spawned): maps the exporter's memory resource once, then buffers."""
    from sides.base import serve_ipc

    def setup(payload):
        handle, ordinal = payload
        core = _import_core()
        dev = core.Device(ordinal)
        dev.set_current()
        mr = core.DeviceMemoryResource.from_allocation_handle(dev, handle)
        stream = dev.create_stream()
        clock = time.perf_counter_ns

        # cuda.core 1.2 wants the stream its imported buffers are freed on (a required keyword-only `stream` in
        # 1.2.2; the H200 runs lost this cell in this call, the message cut before its reason).  The
        # sync makes the free complete here, as the raw side's cuStreamSynchronize and ironaccel's close() do.
        def run(desc, n):
            start = clock()
            for _ in range(n):
                core.Buffer.from_ipc_descriptor(mr, desc, stream=stream).close()
                stream.sync()
            return clock() - start

        return run

    serve_ipc(conn, setup)
