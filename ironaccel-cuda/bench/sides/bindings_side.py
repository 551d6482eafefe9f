"""Peer: NVIDIA's `cuda.bindings.driver` called straight from Python, as a careful user would.

Results are checked on every call (real code must), kernel parameters are packed once up front
(the fastest raw path), host pointers are taken once. Also used by the runner for device facts
and for compiling the benchmark kernel with NVRTC.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import time
import uuid

import numpy as np
from harness import Case

from sides.base import (
    BLOCK,
    CLUSTER_GRID,
    GRID,
    KERNEL_SOURCE,
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
)


def _fail(op: str, err: object) -> RuntimeError:
    return RuntimeError(f"cuda.bindings: {op} failed: {err!r}")


def load_driver():  # -> module
    try:
        from cuda.bindings import driver
    except ImportError as exc:  # the distribution is missing
        raise SideUnavailable(f"cuda.bindings is not installed ({exc})") from exc
    return driver


def init_primary_context(ordinal: int):  # -> (driver, CUdevice, CUcontext)
    """cuInit, the device and its primary context made current on this thread."""
    cu = load_driver()
    try:
        (err,) = cu.cuInit(0)
    except RuntimeError as exc:  # cuda.bindings raises when libcuda is missing altogether
        raise SideUnavailable(f"no CUDA driver: {exc}") from exc
    if err:
        raise SideUnavailable(f"cuInit failed: {err!r}")
    err, dev = cu.cuDeviceGet(ordinal)
    if err:
        raise SideUnavailable(f"cuDeviceGet({ordinal}) failed: {err!r}")
    err, ctx = cu.cuDevicePrimaryCtxRetain(dev)
    if err:
        raise _fail("cuDevicePrimaryCtxRetain", err)
    (err,) = cu.cuCtxSetCurrent(ctx)
    if err:
        raise _fail("cuCtxSetCurrent", err)
    return cu, dev, ctx


def device_facts(ordinal: int) -> dict[str, object]:
    """Name, compute capability, driver version and PCI bus id of the device, read with the driver API."""
    cu, dev, _ = init_primary_context(ordinal)
    attr = cu.CUdevice_attribute
    err, major = cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    err2, minor = cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    err3, name = cu.cuDeviceGetName(256, dev)
    err4, version = cu.cuDriverGetVersion()
    err5, bus = cu.cuDeviceGetPCIBusId(64, dev)
    if err or err2 or err3 or err4:
        raise _fail("device queries", (err, err2, err3, err4))
    return {
        "name": name.split(b"\0", 1)[0].decode(),
        "compute_capability": f"{major}.{minor}",
        "arch": f"{major}{minor}",
        "cuda_driver_api": f"{version // 1000}.{(version % 1000) // 10}",
        "pci_bus_id": bus.split(b"\0", 1)[0].decode() if not err5 else "",
    }


def nvrtc_compile(source: str, arch: str, name: bytes = b"bench.cu") -> bytes:
    """CUBIN for sm_`arch` through cuda.bindings.nvrtc; raises with the log on failure."""
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name, 0, [], [])
    if err:
        raise _fail("nvrtcCreateProgram", err)
    try:
        options = [f"--gpu-architecture=sm_{arch}".encode()]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        if err:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise RuntimeError(f"NVRTC failed ({err!r}): {log.decode(errors='replace')}")
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        if err:
            raise _fail("nvrtcGetCUBINSize", err)
        cubin = b" " * size
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        if err:
            raise _fail("nvrtcGetCUBIN", err)
        return cubin
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}" if not err else "?"


class BindingsSide(Side):
    name = "cuda.bindings"
    label = "cuda.bindings (Python)"

    def open(self, ctx: BenchContext) -> dict[str, str]:
        cu, dev, pctx = init_primary_context(ctx.device)
        self.cu = cu
        self.ctx = ctx
        self.dev = dev
        self.pctx = pctx
        err, self.stream = cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING.value)
        self._ok(err, "cuStreamCreate")
        err, self.module = cu.cuModuleLoadData(ctx.cubin)
        self._ok(err, "cuModuleLoadData")
        self.functions = {}
        for nargs in (4, 16):
            err, fn = cu.cuModuleGetFunction(self.module, kernel_name(nargs).encode())
            self._ok(err, "cuModuleGetFunction")
            self.functions[nargs] = fn
        err, self.out = cu.cuMemAlloc(4)
        self._ok(err, "cuMemAlloc")
        self._keep: list[object] = []  # ctypes storage behind packed kernel parameters
        self._params = {nargs: self._pack(nargs) for nargs in (4, 16)}
        self._device_buffers: dict[int, object] = {}
        self._pinned: dict[int, tuple[int, np.ndarray]] = {}
        self._tokens = itertools.count()
        self._run_token = uuid.uuid4().hex
        import cuda.bindings

        return {"cuda-bindings": cuda.bindings.__version__, "nvrtc": nvrtc_version()}

    def close(self) -> None:
        cu = self.cu
        for ptr in self._device_buffers.values():
            cu.cuMemFree(ptr)
        for ptr, _ in self._pinned.values():
            cu.cuMemFreeHost(ptr)
        cu.cuMemFree(self.out)
        cu.cuModuleUnload(self.module)
        cu.cuStreamDestroy(self.stream)
        cu.cuDevicePrimaryCtxRelease(self.dev)

    # helpers
    def _ok(self, err: object, op: str) -> None:
        if err:
            raise _fail(op, err)

    def _sync(self) -> None:
        (err,) = self.cu.cuStreamSynchronize(self.stream)
        self._ok(err, "cuStreamSynchronize")

    def _pack(self, nargs: int) -> int:
        values: list[object] = [ctypes.c_void_p(int(self.out))]
        values += [ctypes.c_int(v) for v in kernel_ints(nargs)]
        array = (ctypes.c_void_p * nargs)(*[ctypes.addressof(v) for v in values])
        self._keep += [values, array]
        return ctypes.addressof(array)

    def _read_out(self) -> int:
        host = np.zeros(1, dtype=np.int32)
        self._sync()
        (err,) = self.cu.cuMemcpyDtoH(host.ctypes.data, self.out, 4)
        self._ok(err, "cuMemcpyDtoH")
        return int(host[0])

    def _clear_out(self) -> None:
        (err,) = self.cu.cuMemsetD32(self.out, 0, 1)
        self._ok(err, "cuMemsetD32")

    # operations
    def stream_sync(self) -> Case:
        cu, stream = self.cu, self.stream

        def run(n: int) -> None:
            sync = cu.cuStreamSynchronize
            for _ in range(n):
                (err,) = sync(stream)
                if err:
                    raise _fail("cuStreamSynchronize", err)

        return Case(run, note="cuStreamSynchronize")

    def event_cycle(self) -> Case:
        cu, stream = self.cu, self.stream
        flags = cu.CUevent_flags.CU_EVENT_DISABLE_TIMING.value

        def run(n: int) -> None:
            create, record, sync, destroy = cu.cuEventCreate, cu.cuEventRecord, cu.cuEventSynchronize, cu.cuEventDestroy
            for _ in range(n):
                err, event = create(flags)
                if err:
                    raise _fail("cuEventCreate", err)
                (err,) = record(event, stream)
                if err:
                    raise _fail("cuEventRecord", err)
                (err,) = sync(event)
                if err:
                    raise _fail("cuEventSynchronize", err)
                (err,) = destroy(event)
                if err:
                    raise _fail("cuEventDestroy", err)

        return Case(run, note="cuEventCreate(DISABLE_TIMING) + cuEventRecord + cuEventSynchronize + cuEventDestroy")

    def event_reuse(self) -> Case:
        cu, stream = self.cu, self.stream
        err, event = cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING.value)
        self._ok(err, "cuEventCreate")

        def run(n: int) -> None:
            record, sync = cu.cuEventRecord, cu.cuEventSynchronize
            for _ in range(n):
                (err,) = record(event, stream)
                if err:
                    raise _fail("cuEventRecord", err)
                (err,) = sync(event)
                if err:
                    raise _fail("cuEventSynchronize", err)

        return Case(run, close=lambda: cu.cuEventDestroy(event), note="cuEventRecord + cuEventSynchronize")

    def stream_alloc(self, nbytes: int) -> Case:
        cu, stream = self.cu, self.stream

        def run(n: int) -> None:
            alloc, free = cu.cuMemAllocAsync, cu.cuMemFreeAsync
            for _ in range(n):
                err, ptr = alloc(nbytes, stream)
                if err:
                    raise _fail("cuMemAllocAsync", err)
                (err,) = free(ptr, stream)
                if err:
                    raise _fail("cuMemFreeAsync", err)

        def check() -> None:
            err, ptr = cu.cuMemAllocAsync(nbytes, stream)
            self._ok(err, "cuMemAllocAsync")
            (err,) = cu.cuMemsetD8Async(ptr, 7, nbytes, stream)
            self._ok(err, "cuMemsetD8Async")
            (err,) = cu.cuMemFreeAsync(ptr, stream)
            self._ok(err, "cuMemFreeAsync")
            self._sync()

        return Case(run, settle=self._sync, check=check, note="cuMemAllocAsync/cuMemFreeAsync, default pool")

    def pool_alloc(self, nbytes: int) -> Case:
        case = self.stream_alloc(nbytes)
        case.note = "stream-ordered (the driver's default pool): raw bindings have no other pool"
        return case

    def _device_buffer(self, nbytes: int):
        # one buffer per size, so every transfer size has its own allocation as on every other side
        if nbytes not in self._device_buffers:
            err, ptr = self.cu.cuMemAlloc(nbytes)
            self._ok(err, "cuMemAlloc")
            self._device_buffers[nbytes] = ptr
        return self._device_buffers[nbytes]

    def _pinned_buffer(self, nbytes: int) -> tuple[int, np.ndarray]:
        if nbytes not in self._pinned:
            err, ptr = self.cu.cuMemHostAlloc(nbytes, 0)
            self._ok(err, "cuMemHostAlloc")
            view = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(ptr))
            self._pinned[nbytes] = (ptr, view)
        return self._pinned[nbytes]

    def copy(self, direction: str, nbytes: int, pinned: bool) -> Case:
        cu, host = self.cu, self.ctx.host
        dptr = self._device_buffer(nbytes)
        if pinned:
            hptr, hview = self._pinned_buffer(nbytes)
            hview[:] = host.src[:nbytes]
        else:
            hview = host.pageable(self.name, direction, nbytes)
            hptr = hview.ctypes.data
        # The synchronous driver calls, the library's fastest for this: a held-out harness on the H200 measured
        # pageable 64 MiB at 14.4-14.8 GB/s with cuMemcpyHtoD against 7-8 GB/s for the async call on a stream plus
        # a synchronize (FIELD-NOTES); pinned runs at the PCIe limit either way.
        if direction == "h2d":

            def run(n: int) -> None:
                copy = cu.cuMemcpyHtoD
                for _ in range(n):
                    (err,) = copy(dptr, hptr, nbytes)
                    if err:
                        raise _fail("cuMemcpyHtoD", err)

            def check() -> None:
                run(1)
                back = np.empty(nbytes, dtype=np.uint8)
                (err,) = cu.cuMemcpyDtoH(back.ctypes.data, dptr, nbytes)
                self._ok(err, "cuMemcpyDtoH")
                host.expect_equal(back, nbytes, "cuda.bindings h2d")

            return Case(run, check=check, note="cuMemcpyHtoD (synchronous), preallocated device buffer")

        def run_d2h(n: int) -> None:
            copy = cu.cuMemcpyDtoH
            for _ in range(n):
                (err,) = copy(hptr, dptr, nbytes)
                if err:
                    raise _fail("cuMemcpyDtoH", err)

        def check_d2h() -> None:
            (err,) = cu.cuMemcpyHtoD(dptr, host.src[:nbytes].ctypes.data, nbytes)
            self._ok(err, "cuMemcpyHtoD")
            hview[:] = np.bitwise_not(host.src[:nbytes])
            run_d2h(1)
            host.expect_equal(hview, nbytes, "cuda.bindings d2h")

        return Case(run_d2h, check=check_d2h, note="cuMemcpyDtoH (synchronous) into a preallocated array")

    def launch(self, nargs: int) -> Case:
        cu, stream = self.cu, self.stream
        fn, params = self.functions[nargs], self._params[nargs]
        (gx, gy, gz), (bx, by, bz) = GRID, BLOCK

        def run(n: int) -> None:
            launch = cu.cuLaunchKernel
            for _ in range(n):
                (err,) = launch(fn, gx, gy, gz, bx, by, bz, 0, stream, params, 0)
                if err:
                    raise _fail("cuLaunchKernel", err)

        return Case(run, settle=self._sync, check=self.kernel_check(run, nargs),
                    note="cuLaunchKernel, parameters packed once (ctypes)")

    def launch_cluster(self, cluster: int) -> Case:
        cu, stream = self.cu, self.stream
        fn, params = self.functions[4], self._params[4]
        config = cu.CUlaunchConfig()  # built once, as a runtime that launches it repeatedly would
        config.gridDimX, config.gridDimY, config.gridDimZ = CLUSTER_GRID, 1, 1
        config.blockDimX, config.blockDimY, config.blockDimZ = BLOCK
        config.sharedMemBytes = 0
        config.hStream = stream
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster, 1, 1
        config.attrs = [attr]
        config.numAttrs = 1

        def run(n: int) -> None:
            launch = cu.cuLaunchKernelEx
            for _ in range(n):
                (err,) = launch(config, fn, params, 0)
                if err:
                    raise _fail("cuLaunchKernelEx", err)

        return Case(run, settle=self._sync, check=self.kernel_check(run),
                    note="cuLaunchKernelEx, CUlaunchConfig built once")

    def copy_to_new(self, nbytes: int) -> Case:
        cu, host = self.cu, self.ctx.host
        dptr = self._device_buffer(nbytes)
        (err,) = cu.cuMemcpyHtoD(dptr, host.src[:nbytes].ctypes.data, nbytes)
        self._ok(err, "cuMemcpyHtoD")

        def get() -> np.ndarray:
            out = np.empty(nbytes, dtype=np.uint8)
            (err,) = cu.cuMemcpyDtoH(out.ctypes.data, dptr, nbytes)
            if err:
                raise _fail("cuMemcpyDtoH", err)
            return out

        def run(n: int) -> None:
            for _ in range(n):
                get()

        return Case(run, check=lambda: host.expect_equal(get(), nbytes, "cuda.bindings d2h new"),
                    note="np.empty + cuMemcpyDtoH (synchronous)")

    def eager_launches(self, count: int) -> Case:
        cu, stream = self.cu, self.stream
        fn, params = self.functions[4], self._params[4]
        (gx, gy, gz), (bx, by, bz) = GRID, BLOCK

        def run(n: int) -> None:
            launch, sync = cu.cuLaunchKernel, cu.cuStreamSynchronize
            for _ in range(n):
                for _ in range(count):
                    (err,) = launch(fn, gx, gy, gz, bx, by, bz, 0, stream, params, 0)
                    if err:
                        raise _fail("cuLaunchKernel", err)
                (err,) = sync(stream)
                if err:
                    raise _fail("cuStreamSynchronize", err)

        return Case(run, check=self.kernel_check(run), note="cuLaunchKernel x N + cuStreamSynchronize")

    def graph_replay(self, count: int) -> Case:
        cu, stream = self.cu, self.stream
        fn, params = self.functions[4], self._params[4]
        (gx, gy, gz), (bx, by, bz) = GRID, BLOCK
        mode = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        (err,) = cu.cuStreamBeginCapture(stream, mode)
        self._ok(err, "cuStreamBeginCapture")
        for _ in range(count):
            (err,) = cu.cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, 0, stream, params, 0)
            self._ok(err, "cuLaunchKernel (capture)")
        err, graph = cu.cuStreamEndCapture(stream)
        self._ok(err, "cuStreamEndCapture")
        err, exe = cu.cuGraphInstantiate(graph, 0)
        self._ok(err, "cuGraphInstantiate")

        def run(n: int) -> None:
            launch, sync = cu.cuGraphLaunch, cu.cuStreamSynchronize
            for _ in range(n):
                (err,) = launch(exe, stream)
                if err:
                    raise _fail("cuGraphLaunch", err)
                (err,) = sync(stream)
                if err:
                    raise _fail("cuStreamSynchronize", err)

        def close() -> None:
            cu.cuGraphExecDestroy(exe)
            cu.cuGraphDestroy(graph)

        return Case(run, check=self.kernel_check(run), close=close,
                    note="stream capture; cuGraphLaunch + cuStreamSynchronize")

    def nvrtc_cold(self) -> Case:
        arch = self.ctx.arch

        def run(n: int) -> None:
            for _ in range(n):
                nvrtc_compile(unique_source(next(self._tokens), self._run_token), arch)

        def check() -> None:
            if not nvrtc_compile(NVRTC_SOURCE, arch).startswith(b"\x7fELF"):
                raise CheckFailed("cuda.bindings: NVRTC output is not an ELF cubin")

        return Case(run, check=check, max_batch=64, note="no cache: raw NVRTC has none")

    # memory rows (issue 10)
    def pool_cycle(self, nbytes: int, raised: bool) -> Case:
        cu, stream = self.cu, self.stream
        set_default_pool_threshold(self.ctx.device, MAX_THRESHOLD if raised else 0)

        def run(n: int) -> None:
            alloc, free, sync = cu.cuMemAllocAsync, cu.cuMemFreeAsync, cu.cuStreamSynchronize
            for _ in range(n):
                err, ptr = alloc(nbytes, stream)
                if err:
                    raise _fail("cuMemAllocAsync", err)
                (err,) = free(ptr, stream)
                if err:
                    raise _fail("cuMemFreeAsync", err)
                (err,) = sync(stream)
                if err:
                    raise _fail("cuStreamSynchronize", err)

        def close() -> None:
            self._sync()
            set_default_pool_threshold(self.ctx.device, MAX_THRESHOLD)

        return Case(run, close=close, note="cuMemAllocAsync + cuMemFreeAsync + cuStreamSynchronize; threshold via "
                    "cuMemPoolSetAttribute on the default pool")

    def ipc_roundtrip(self, nbytes: int) -> Case:
        from multiprocessing import reduction

        cu, stream = self.cu, self.stream
        props = cu.CUmemPoolProps()
        props.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        props.handleTypes = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        props.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        props.location.id = self.ctx.device
        err, pool = cu.cuMemPoolCreate(props)
        self._ok(err, "cuMemPoolCreate")
        err, ptr = cu.cuMemAllocFromPoolAsync(nbytes, pool, stream)
        self._ok(err, "cuMemAllocFromPoolAsync")
        self._sync()
        err, fd = cu.cuMemPoolExportToShareableHandle(
            pool, cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)
        self._ok(err, "cuMemPoolExportToShareableHandle")
        importer = IpcImporter(ipc_importer, (reduction.DupFd(int(fd)), self.ctx.device))
        export = cu.cuMemPoolExportPointer

        # The allocation's export data is fixed for its life, so it is made once, as ironaccel and cuda.core keep
        # it (cuMemPoolExportPointer costs ~20 us on the H200: experiments/probe_ipc.py); each operation is then the
        # import + free + synchronize in the importer.
        err, data = export(ptr)
        if err:
            raise _fail("cuMemPoolExportPointer", err)
        raw = ctypes.string_at(data.getPtr(), 64)

        def run(n: int) -> int:
            return importer.import_close(raw, n)

        def close() -> None:
            importer.close()
            os.close(int(fd))
            cu.cuMemFreeAsync(ptr, stream)
            self._sync()
            cu.cuMemPoolDestroy(pool)

        return Case(run, close=close, note="cuMemPoolExportPointer once (the data is fixed for the allocation's "
                    "life); in the importer cuMemPoolImportPointer + cuMemFreeAsync + cuStreamSynchronize (pool "
                    "imported once)")

    def _vmm_prop(self):  # -> (CUmemAllocationProp, granularity)
        cu = self.cu
        prop = cu.CUmemAllocationProp()
        prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = self.ctx.device
        err, granularity = cu.cuMemGetAllocationGranularity(
            prop, cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM)
        self._ok(err, "cuMemGetAllocationGranularity")
        return prop, int(granularity)

    def grow_in_place(self, nbytes: int, steps: int) -> Case:
        cu = self.cu
        prop, granularity = self._vmm_prop()
        if nbytes % granularity:
            raise Unsupported(f"{nbytes} is not a multiple of the granularity {granularity}")
        err, base = cu.cuMemAddressReserve((steps + 1) * nbytes, granularity, 0, 0)
        self._ok(err, "cuMemAddressReserve")
        access = cu.CUmemAccessDesc()
        access.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        access.location.id = self.ctx.device
        access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        chunks: list[tuple[int, object]] = []

        def grow() -> None:
            at = int(base) + len(chunks) * nbytes
            err, handle = cu.cuMemCreate(nbytes, prop, 0)
            if err:
                raise _fail("cuMemCreate", err)
            (err,) = cu.cuMemMap(at, nbytes, 0, handle, 0)
            if err:
                raise _fail("cuMemMap", err)
            (err,) = cu.cuMemSetAccess(at, nbytes, [access], 1)
            if err:
                raise _fail("cuMemSetAccess", err)
            chunks.append((at, handle))

        def shrink_to(count: int) -> None:
            (err,) = cu.cuCtxSynchronize()
            self._ok(err, "cuCtxSynchronize")
            while len(chunks) > count:
                at, handle = chunks.pop()
                cu.cuMemUnmap(at, nbytes)
                cu.cuMemRelease(handle)

        grow()

        def run(n: int) -> None:
            for _ in range(n):
                grow()

        def close() -> None:
            shrink_to(0)
            cu.cuMemAddressFree(base, (steps + 1) * nbytes)

        return Case(run, settle=lambda: shrink_to(1), close=close, max_batch=steps,
                    note="cuMemCreate + cuMemMap + cuMemSetAccess of the next chunk; unmapping is untimed")

    def grow_by_copy(self, nbytes: int) -> Case:
        cu, stream = self.cu, self.stream
        err, old = cu.cuMemAllocAsync(nbytes, stream)
        self._ok(err, "cuMemAllocAsync")
        self._sync()

        def run(n: int) -> None:
            for _ in range(n):
                err, new = cu.cuMemAllocAsync(2 * nbytes, stream)
                if err:
                    raise _fail("cuMemAllocAsync", err)
                (err,) = cu.cuMemcpyDtoDAsync(new, old, nbytes, stream)
                if err:
                    raise _fail("cuMemcpyDtoDAsync", err)
                (err,) = cu.cuStreamSynchronize(stream)
                if err:
                    raise _fail("cuStreamSynchronize", err)
                (err,) = cu.cuMemFreeAsync(new, stream)
                if err:
                    raise _fail("cuMemFreeAsync", err)

        def close() -> None:
            cu.cuMemFreeAsync(old, stream)
            self._sync()

        return Case(run, close=close, max_batch=64,
                    note="cuMemAllocAsync(2 GiB) + cuMemcpyDtoDAsync + cuStreamSynchronize + cuMemFreeAsync")

    def managed_prefetch(self, nbytes: int) -> Case:
        cu, stream = self.cu, self.stream
        err, ptr = cu.cuMemAllocManaged(nbytes, cu.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL.value)
        self._ok(err, "cuMemAllocManaged")
        ctypes.memset(int(ptr), 1, nbytes)  # populated on the host
        device, host = cu.CUmemLocation(), cu.CUmemLocation()
        device.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        device.id = self.ctx.device
        host.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST

        def prefetch(where) -> None:
            (err,) = cu.cuMemPrefetchAsync(ptr, nbytes, where, 0, stream)
            if err:
                raise _fail("cuMemPrefetchAsync", err)
            self._sync()

        def run(n: int) -> None:
            for _ in range(n):
                prefetch(device)

        def close() -> None:
            self._sync()
            cu.cuMemFree(ptr)

        return Case(run, settle=lambda: prefetch(host), close=close, max_batch=1,
                    note="cuMemPrefetchAsync to the device + cuStreamSynchronize; back to the host untimed")


def benchmark_cubin(arch: str) -> bytes:
    """The benchmark kernel as CUBIN (the one every side that loads bytes uses)."""
    try:
        return nvrtc_compile(KERNEL_SOURCE, arch)
    except ImportError as exc:
        raise Unsupported(f"cuda.bindings.nvrtc unavailable: {exc}") from exc


def ipc_importer(conn) -> None:
    """The importing process of the IPC row (spawned): imports the exporter's pool once, then pointers."""
    from sides.base import serve_ipc

    def setup(payload):
        carried, ordinal = payload
        cu, _, _ = init_primary_context(ordinal)
        handle_type = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        fd = carried.detach()
        err, pool = cu.cuMemPoolImportFromShareableHandle(fd, handle_type, 0)
        os.close(fd)
        if err:
            raise _fail("cuMemPoolImportFromShareableHandle", err)
        err, stream = cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING.value)
        if err:
            raise _fail("cuStreamCreate", err)
        clock = time.perf_counter_ns

        def run(raw, n):
            data = cu.CUmemPoolPtrExportData()
            ctypes.memmove(data.getPtr(), raw, 64)
            imp, free, sync = cu.cuMemPoolImportPointer, cu.cuMemFreeAsync, cu.cuStreamSynchronize
            start = clock()
            for _ in range(n):
                err, ptr = imp(pool, data)
                if err:
                    raise _fail("cuMemPoolImportPointer", err)
                (err,) = free(ptr, stream)
                if err:
                    raise _fail("cuMemFreeAsync", err)
                (err,) = sync(stream)
                if err:
                    raise _fail("cuStreamSynchronize", err)
            return clock() - start

        return run

    serve_ipc(conn, setup)
