"""Bad input to the PyCUDA surface gets PyCUDA's typed errors, naming the call, and loses or leaks nothing.

Each test here is for an input that once crashed the process (object dtypes
over raw memory, 2-D/3-D copies past a host buffer), silently did the wrong
thing (floats truncated to sizes, fill values and launch dimensions; records
on a detached context's event ignored), let a raw Python error out of the
library (OverflowError, AttributeError, KeyError, ValueError from int(), ...)
or leaked (a module loaded before a raising message handler, a host-pool
block taken before a bad `order` was noticed).  Every error is a
`pycuda.driver.LogicError` (or `MemoryError`), also ironaccel's typed error,
and where PyCUDA raises a built-in for the input it is that built-in too.
All checks happen before any driver call, so they hold on a real GPU as on
the fake driver.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from conftest import FAKE
from helpers.kernels import SOURCE

import ironaccel

pytestmark = pytest.mark.backend("cuda")


def refused(drv, call, builtin=None, op=None, cls=None):
    """Run `call`, which must raise PyCUDA's `cls` (LogicError) that is ironaccel's too, `builtin` if given,
    and names `op` in its text; returns the error."""
    cls = cls or drv.LogicError
    with pytest.raises(cls) as info:
        call()
    err = info.value
    assert isinstance(err, ironaccel.IronAccelError), type(err).__mro__
    if builtin is not None:
        assert isinstance(err, builtin), type(err).__mro__
    if op is not None:
        assert op in str(err), str(err)
    return err


# -- inputs that crashed the process ----------------------------------------------------------------


def test_object_dtypes_are_refused_for_raw_host_memory(ctx, drv):
    """An object array over uninitialised raw memory holds garbage pointers: printing it segfaulted."""
    from ironaccel_cuda_compat.pycuda import tools

    G = drv.mem_attach_flags.GLOBAL
    for call in (lambda: drv.pagelocked_empty(4, object), lambda: drv.aligned_empty(4, object),
                 lambda: drv.managed_empty(4, object, mem_flags=G),
                 lambda: drv.pagelocked_empty(2, [("a", np.int32), ("b", object)]),
                 lambda: tools.PageLockedMemoryPool().allocate(4, object)):
        refused(drv, call, TypeError, "numpy_empty")
    assert drv.pagelocked_zeros(4, [("a", np.int8), ("b", np.float64)])["b"].sum() == 0  # plain structs still work


def test_2d_and_3d_copies_may_not_run_past_a_host_buffer(ctx, drv):
    """The driver reads and writes host memory where the copy says; past the buffer it crashed or corrupted
    the heap.  Now the copy is refused before the driver sees it, and the device memory is untouched."""
    dev, pitch = drv.mem_alloc_pitch(16, 8, 4)
    drv.memset_d2d8(dev, pitch, 7, 16, 8)
    host = np.arange(16, dtype=np.float32).reshape(4, 4)  # 64 bytes
    c = drv.Memcpy2D()
    c.set_src_host(host)
    c.set_dst_device(dev)
    c.width_in_bytes, c.src_pitch, c.dst_pitch = 16, 16, pitch
    c.height = 5  # one row past the source
    refused(drv, c, op="cuMemcpy2DUnaligned")
    refused(drv, lambda: c(aligned=True), op="cuMemcpy2D")
    stream = drv.Stream()
    refused(drv, lambda: c(stream), op="cuMemcpy2DAsync")
    c.height, c.src_y = 4, 1  # starts a row in
    refused(drv, c)
    c.src_y, c.src_x_in_bytes = 0, 4
    refused(drv, c)
    back = np.zeros((8, pitch), np.uint8)
    drv.memcpy_dtoh(back, dev)
    assert (back[:, :16] == 7).all()  # nothing was copied

    c.src_x_in_bytes = 0
    c()  # the copy that fits still runs
    out = np.zeros((2, 4), np.float32)  # 32 bytes: too small for 4 rows
    d = drv.Memcpy2D()
    d.set_src_device(dev)
    d.set_dst_host(out)
    d.width_in_bytes, d.height, d.src_pitch, d.dst_pitch = 16, 4, pitch, 16
    refused(drv, d)
    assert not out.any()
    d.height = 2
    d()
    assert (out == host[:2]).all()

    cube = np.zeros((2, 4, 4), np.float32)  # 128 bytes
    dev3 = drv.mem_alloc(3 * 64)
    e = drv.Memcpy3D()
    e.set_src_host(cube)
    e.set_dst_device(dev3)
    e.width_in_bytes, e.height, e.src_pitch, e.src_height, e.dst_pitch, e.dst_height = 16, 4, 16, 4, 16, 4
    e.depth = 3
    refused(drv, e, op="cuMemcpy3D")
    e.depth, e.src_z = 2, 1
    refused(drv, e)


def test_copies_take_contiguous_host_buffers_only(ctx, drv):
    """PyCUDA asks for a contiguous buffer; a strided array's address described other bytes than the array."""
    c = drv.Memcpy2D()
    refused(drv, lambda: c.set_dst_host(np.zeros((4, 4))[:, ::2]), BufferError, "set_dst_host")
    refused(drv, lambda: c.set_src_host(memoryview(np.zeros((4, 4))[:, ::2])), BufferError, "set_src_host")
    refused(drv, lambda: c.set_dst_host(b"read-only"), BufferError, "set_dst_host")
    c.set_src_host(np.asfortranarray(np.zeros((4, 4))))  # contiguous in memory order is fine


# -- inputs that silently did the wrong thing ---------------------------------------------------------


def test_floats_are_not_truncated_to_sizes_values_or_dimensions(ctx, drv, mod):
    """The compiled calls turned 1.5 into 1; PyCUDA refuses floats (TypeError).  Nothing is written."""
    a = drv.mem_alloc(64)
    drv.memset_d8(a, 0, 64)
    for call, op in [
        (lambda: drv.memset_d32(a, 1.5, 4), "cuMemsetD32"), (lambda: drv.memset_d8(a, 1, 2.5), "cuMemsetD8"),
        (lambda: drv.memset_d16_async(a, 1, 4.0), "cuMemsetD16Async"),
        (lambda: drv.memset_d2d32(a, 16, 1.5, 4, 4), "cuMemsetD2D32"),
        (lambda: drv.memset_d2d8(a, 16.0, 1, 4, 4), "cuMemsetD2D8"),
        (lambda: drv.memcpy_dtod(a, a + 32, 8.0), "cuMemcpyDtoD"),
    ]:
        refused(drv, call, TypeError, op)
    out = np.ones(64, np.uint8)
    drv.memcpy_dtoh(out, a)
    assert not out.any()
    drv.memset_d32(a, np.uint32(3), np.int64(2))  # numpy integers are ints
    drv.memcpy_dtoh(out, a)
    assert out[:8].view(np.uint32).tolist() == [3, 3]

    f = mod.get_function("saxpy")
    args = (np.float32(1), a, a, np.uint32(4))
    for kw in ({"block": (4.5, 1, 1)}, {"block": (4, 1, 1), "grid": (1.5, 1)}, {"block": (4, 1, 1), "shared": 1.5}):
        refused(drv, lambda kw=kw: f(*args, **kw), TypeError, "cuLaunchKernel")
    f.prepare("fPPI")
    refused(drv, lambda: f.prepared_call((1, 1), (4, 1.5, 1), 1.0, a, a, 4), TypeError, "cuLaunchKernel")
    c = drv.Memcpy2D()
    refused(drv, lambda: setattr(c, "height", 2.0), TypeError, "Memcpy2D")


def test_records_and_waits_on_a_detached_contexts_objects_are_refused(drv):
    """A detached context took its events, streams and kernels with it: `record()` used to return as if it
    had recorded, the others passed the dead handles to the driver."""
    from ironaccel_cuda_compat.pycuda.compiler import SourceModule

    dev = drv.Device(0)
    c1 = dev.make_context()
    event, stream = drv.Event(), drv.Stream()
    f = SourceModule(SOURCE, no_extern_c=True).get_function("saxpy")
    c2 = dev.make_context()
    try:
        event.record()  # another context's event: recorded there
        c1.detach()
        for call, op in [(event.record, "cuEventRecord"), (event.synchronize, "cuEventSynchronize"),
                         (event.query, "cuEventQuery"), (lambda: drv.Event().record().time_since(event),
                                                         "cuEventElapsedTime"),
                         (lambda: event.time_till(drv.Event()), "cuEventElapsedTime"),
                         (lambda: drv.Event().record(stream), "cuEventRecord"),
                         (stream.synchronize, "cuStreamSynchronize"), (stream.is_done, "cuStreamQuery"),
                         (lambda: stream.wait_for_event(drv.Event()), "cuStreamWaitEvent"),
                         (lambda: f.num_regs, "cuFuncGetAttribute"),
                         (c1.get_api_version, "cuCtxGetApiVersion"),
                         (lambda: drv.Context.enable_peer_access(c1), "cuCtxEnablePeerAccess")]:
            err = refused(drv, call, op=op)
            assert err.code == 201 and "detached" in str(err)  # CUDA_ERROR_INVALID_CONTEXT, as PyCUDA says
        assert drv.Context.get_current() is c2
    finally:
        while drv.Context.get_current() is not None:
            drv.Context.pop()
        c2.detach()


# -- raw Python errors from inside the library ---------------------------------------------------------


def test_conversion_errors_are_pycudas_typed_errors(ctx, drv, mod):
    """Each of these let a bare OverflowError, ValueError, TypeError, KeyError or AttributeError out."""
    from ironaccel_cuda_compat.pycuda import compiler, tools

    f = mod.get_function("saxpy")
    a = drv.mem_alloc(64)
    dev = drv.Device(0)
    cases = [
        (lambda: dev.make_context(-1), OverflowError, "cuCtxCreate"),
        (lambda: dev.make_context(1 << 40), OverflowError, "cuCtxCreate"),
        (lambda: drv.Context.set_limit(drv.limit.STACK_SIZE, "x"), TypeError, "cuCtxSetLimit"),
        (lambda: drv.Context.enable_peer_access(None), TypeError, "cuCtxEnablePeerAccess"),
        (lambda: drv.Context.disable_peer_access(5), TypeError, "cuCtxDisablePeerAccess"),
        (lambda: f.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, "x"), TypeError,
         "cuFuncSetAttribute"),
        (lambda: f(np.float32(1), a, a, np.uint32(4), block=(4, 1, 1), grid={1: 2}), TypeError, "cuLaunchKernel"),
        (lambda: f.prepare(None), TypeError, "Function.prepare"),
        (lambda: f.prepare(5), TypeError, "Function.prepare"),
        (lambda: drv.module_from_buffer(b"\0", options=[5]), TypeError, "cuModuleLoadDataEx"),
        (lambda: drv.IPCMemoryHandle(bytearray(64), "x"), TypeError, "cuIpcOpenMemHandle"),
        (lambda: a.as_buffer("x"), TypeError, "as_buffer"),
        (lambda: a.as_buffer(8, 1.5), TypeError, "as_buffer"),
        (lambda: a.as_buffer(1 << 70), None, "as_buffer"),
        (lambda: drv.to_device(None), TypeError, "to_device"),
        (lambda: drv.mem_alloc_like(None), TypeError, "mem_alloc_like"),
        (lambda: drv.from_device(a, (4,), "no such dtype"), TypeError, "from_device"),
        (lambda: drv.from_device(a, (4,), np.float32, order="Q"), ValueError, "from_device"),
        (lambda: drv.dtype_to_array_format("no such dtype"), TypeError, "dtype_to_array_format"),
        (lambda: drv.pagelocked_empty_like([1, 2]), TypeError, "empty_like"),
        (lambda: drv.pagelocked_empty(None, np.float32), TypeError, "numpy_empty"),
        (lambda: drv.pagelocked_empty(4.5, np.float32), TypeError, "numpy_empty"),
        (lambda: drv.pagelocked_empty(("a", 2), np.float32), TypeError, "numpy_empty"),
        (lambda: drv.pagelocked_empty(1 << 70, np.float32), OverflowError, "cuMemHostAlloc"),
        (lambda: drv.pagelocked_empty(4, "no such dtype"), TypeError, "numpy_empty"),
        (lambda: drv.pagelocked_empty(4, np.float32, order=None), None, "numpy_empty"),
        (lambda: drv.aligned_empty(-4, np.float32), ValueError, "numpy_empty"),
        (lambda: drv.aligned_empty(4, np.float32, alignment="x"), TypeError, "aligned_empty"),
        (lambda: drv.Memcpy3DPeer().set_src_context(None), TypeError, "set_src_context"),
        (lambda: drv.Linker(options=[5]), TypeError, "nvJitLinkCreate"),
        (lambda: drv.Linker(options=[(9999, 1)]), None, "nvJitLinkCreate"),
        (lambda: drv.Linker(options=[(drv.jit_option.MAX_REGISTERS, "x")]), None, "nvJitLinkCreate"),
        (lambda: compiler.SourceModule("__global__ void k() {}", arch=90), TypeError, "compile"),
        (lambda: compiler.SourceModule("__global__ void k() {}", code=90), TypeError, "compile"),
        (lambda: compiler.SourceModule("__global__ void k() {}", options=5), TypeError, "compile"),
        (lambda: tools.bitlog2("x"), TypeError, "bitlog2"),
        (lambda: tools.PageLockedAllocator("x"), TypeError, "PageLockedAllocator"),
    ]
    for call, builtin, op in cases:
        refused(drv, call, builtin, op)
    assert drv.Context.get_current() is ctx  # nothing above pushed, popped or made a context


def test_host_memory_objects_are_not_made_directly(ctx, drv):
    """PyCUDA has no constructor for these; calling one gave objects whose every method raised AttributeError."""
    for cls in (drv.HostPointer, drv.PagelockedHostAllocation, drv.AlignedHostAllocation,
                drv.RegisteredHostMemory, drv.ManagedAllocation):
        refused(drv, cls, TypeError, cls.__name__)


def test_linked_modules_refuse_more_inputs(ctx, drv):
    """After link(), DynamicModule's linker is gone: a second link() or add_*() raised AttributeError."""
    from ironaccel_cuda_compat.pycuda.compiler import DynamicModule

    try:
        m = DynamicModule().add_source("__device__ int twice(int x) { return 2 * x; }\n"
                                       "__global__ void k(int* p) { *p = twice(*p); }").link()
    except drv.Error as exc:
        if FAKE and isinstance(exc, ironaccel.NotAvailable):
            pytest.skip(f"nvJitLink is not installed here: {exc}")
        raise
    for call, op in [(m.link, "DynamicModule.link"), (lambda: m.add_stdlib("cudadevrt"), "DynamicModule.add_stdlib"),
                     (lambda: m.add_data(b"x", drv.jit_input_type.PTX), "DynamicModule.add_data")]:
        refused(drv, call, op=op)


def test_occupancy_of_an_empty_block_is_a_value_error(ctx, drv):
    """Zero threads divided by zero inside the library (ZeroDivisionError)."""
    from ironaccel_cuda_compat.pycuda import tools

    data = tools.DeviceData()
    with pytest.raises(ValueError, match="at least one thread"):
        tools.OccupancyRecord(data, 0)
    assert 0 < tools.OccupancyRecord(data, 128).occupancy <= 1


# -- the device memory pool -------------------------------------------------------------------------------


def test_pool_sizes_are_checked_and_too_much_is_out_of_memory(ctx, drv):
    """allocate(-1) handed out a block and took 1 byte off active_bytes; allocate(1.5) truncated; more than the
    device has was a LogicError, where PyCUDA's pool says MemoryError.  A huge bin number built a huge int."""
    from ironaccel_cuda_compat.pycuda import tools

    pool = tools.DeviceMemoryPool()
    try:
        refused(drv, lambda: pool.allocate(-1), OverflowError, "memory_pool::allocate")
        refused(drv, lambda: pool.allocate(1.5), TypeError, "memory_pool::allocate")
        refused(drv, lambda: pool.allocate("x"), TypeError, "memory_pool::allocate")
        refused(drv, lambda: pool.allocate(1 << 70), OverflowError, "memory_pool::allocate")
        total = drv.Device(0).total_memory()
        err = refused(drv, lambda: pool.allocate(total + 1), cls=drv.MemoryError, op="memory_pool::allocate")
        assert isinstance(err, ironaccel.OutOfMemory)
        assert (pool.active_blocks, pool.active_bytes) == (0, 0)
        refused(drv, lambda: pool.alloc_size(1 << 40), OverflowError, "memory_pool::alloc_size")
        refused(drv, lambda: pool.bin_number("x"), TypeError, "memory_pool::bin_number")
        block = pool.allocate(100)
        assert (pool.active_blocks, pool.active_bytes, len(block)) == (1, 100, 100)
        block.free()
        assert (pool.active_blocks, pool.active_bytes) == (0, 0)
    finally:
        pool.stop_holding()


# -- leaks on error paths -------------------------------------------------------------------------------------


def test_a_bad_order_is_refused_before_host_memory_is_taken(ctx, drv):
    """`order` was checked only after cuMemHostAlloc: the block was made, then dropped to the collector."""
    from ironaccel_cuda_compat.pycuda import tools

    pool = tools.PageLockedMemoryPool()
    for order in ("Q", None, 3):
        refused(drv, lambda o=order: pool.allocate(4, np.float32, order=o), op="numpy_empty")
        refused(drv, lambda o=order: drv.pagelocked_empty(4, np.float32, order=o), op="numpy_empty")
        refused(drv, lambda o=order: drv.managed_empty(4, np.float32, order=o, mem_flags=drv.mem_attach_flags.GLOBAL),
                op="numpy_empty")
    assert (pool.managed_bytes, pool.held_blocks, pool.active_blocks) == (0, 0, 0)  # no block was ever made
    assert pool.allocate((2, 3), np.float32, order="F").flags.f_contiguous


def test_a_raising_message_handler_leaves_no_module_loaded(ctx, drv, monkeypatch):
    """The module loaded by cuModuleLoadDataEx was held only as a raw handle until after the message handler ran:
    a handler that raised leaked it (never unloaded).  Now it is a Module at once, unloaded when collected."""
    from ironaccel_cuda_compat.pycuda import _module, compiler

    image = compiler.compile(SOURCE, no_extern_c=True)
    made = []
    real = _module.Module._make.__func__

    def tracking(cls, h, c):
        m = real(cls, h, c)
        made.append(weakref.ref(m))
        return m

    monkeypatch.setattr(_module.Module, "_make", classmethod(tracking))

    def handler(ok, info, error):
        raise KeyError("the handler's own error")

    with pytest.raises(KeyError):  # the caller's own exception passes through, as in PyCUDA
        drv.module_from_buffer(image, message_handler=handler)
    gc.collect()
    assert len(made) == 1 and made[0]() is None  # made, then collected (its __del__ unloads it)
    kernel = drv.module_from_buffer(image, message_handler=lambda *a: None).get_function("saxpy")
    assert kernel.num_regs >= 0
