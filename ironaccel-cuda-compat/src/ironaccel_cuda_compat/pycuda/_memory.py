"""Device and host memory with PyCUDA's semantics: allocations, copies, memsets, page-locked arrays, IPC.

`mem_alloc(n)` returns a `DeviceAllocation`, which is an `int` (the device
address) with `free()`: `int(a)`, `np.intp(a)` and `a + 4` are pointer
arithmetic, and kernel argument packing reads it with no Python call.  The
memory comes from the device's stream-ordered pool (`cuMemAllocAsync` on the
context's legacy default stream, through ironaccel's compiled hot path),
which is what makes allocation cheap; `free()` is ordered after all earlier
work of blocking streams in the context, as `cuMemFree` is (with a live
non-blocking stream in the context it synchronizes the context first).
`IRONACCEL_CUDA_PYCUDA_ALLOC=sync` (read at import) gives `cuMemAlloc` memory
instead, which legacy IPC (`mem_get_ipc_handle`) needs.

Synchronous copies keep the driver's guarantees: `memcpy_htod` returns once
the source may be reused (small copies are staged through the context's own
page-locked slots, and only a slot's reuse waits for its DMA), `memcpy_dtoh`
once the data has arrived.  Large pageable copies into or out of pool memory
go through ironaccel's staging pipeline (several threads and page-locked
slots overlapping the DMA), after the context has finished earlier work.
Everything else is the plain driver copy on the legacy stream.
"""

from __future__ import annotations

import ctypes
import gc
from typing import Any

import numpy as np

from ironaccel import errors as ia

from . import _fast
import ironaccel_cuda as cu
from ironaccel_cuda import ipc

from ._context import Context, _bind_top, _current, _flags, _local, address, call, cleanup, enum_value, guarded
from ._enums import memory_type
from ._errors import bad_input, bad_type, from_code, invalid, no_arrays, translate

__all__ = [
    "DeviceAllocation", "PointerHolderBase", "mem_alloc", "mem_alloc_pitch", "mem_get_info", "mem_get_address_range",
    "memcpy_htod", "memcpy_dtoh", "memcpy_htod_async", "memcpy_dtoh_async", "memcpy_dtod", "memcpy_dtod_async",
    "memcpy_peer", "memcpy_peer_async", "memset_d8", "memset_d16", "memset_d32", "memset_d8_async",
    "memset_d16_async", "memset_d32_async", "memset_d2d8", "memset_d2d16", "memset_d2d32", "memset_d2d8_async",
    "memset_d2d16_async", "memset_d2d32_async", "HostPointer", "PagelockedHostAllocation", "HostAllocation",
    "AlignedHostAllocation", "RegisteredHostMemory", "ManagedAllocation", "pagelocked_empty", "aligned_empty",
    "managed_empty", "register_host_memory", "mem_get_ipc_handle", "IPCMemoryHandle", "Memcpy2D", "Memcpy3D",
    "Memcpy3DPeer", "is_pinned_array",
]

_LEGACY = _fast.LEGACY
_ATTACH_MODES = {1: "global", 2: "host", 4: "single"}  # PyCUDA's mem_attach_flags, the driver's values
_int_new = int.__new__
_ndarray = np.ndarray
_FREED, _POOL, _SYNC = 0, 1, 2
_OUT_OF_MEMORY = 2
_INVALID_HANDLE = 400
CU_EVENT_DISABLE_TIMING = 0x2
CU_MEMHOSTALLOC_PORTABLE = 0x1
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1


# -- device allocations -----------------------------------------------------------


class DeviceAllocation(int):
    """pycuda.driver.DeviceAllocation: device memory from `mem_alloc`.

    The object is an int, the device address, so `int(a)`, `np.intp(a)`,
    `a + offset` and passing it wherever an address goes all work.
    `free()` gives the memory back (once; a second call is a LogicError);
    garbage collection does the same.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> DeviceAllocation:
        raise bad_type("DeviceAllocation", "allocate device memory with mem_alloc()")

    def free(self) -> None:
        d = self.__dict__
        kind = d.get("_kind", _FREED)
        if kind == _FREED:
            raise from_code(_INVALID_HANDLE, "device_allocation::free")
        d["_kind"] = _FREED
        _release(d["_dp"], d["_ctx"], kind)

    def as_buffer(self, size: int, offset: int = 0) -> memoryview:
        """A host memoryview of `size` bytes at this address + `offset` (managed or host-mapped memory only)."""
        return _as_buffer(int(self), size, offset)

    def __del__(self) -> None:
        d = self.__dict__
        kind = d.get("_kind", _FREED)
        if kind != _FREED:
            d["_kind"] = _FREED
            try:
                _release(d["_dp"], d["_ctx"], kind)
            except Exception:
                pass

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise bad_type("DeviceAllocation", "device allocations cannot be pickled or copied")

    def __repr__(self) -> str:
        state = "" if self.__dict__.get("_kind", _FREED) != _FREED else " freed"
        return f"<DeviceAllocation 0x{int(self):x}{state}>"

    __str__ = __repr__


def _sync_current() -> None:
    """Wait for the current context's work (cuCtxSynchronize), failing as PyCUDA does."""
    import ironaccel_cuda

    guarded("cuCtxSynchronize", ironaccel_cuda.synchronize_current_context)


def _release(dp: Any, ctx: Context, kind: int) -> None:
    stack = _local.stack
    if stack and stack[-1] is ctx and ctx._valid:
        _fast.ensure(ctx.handle)
        try:
            if kind == _POOL:
                if ctx.nonblocking:
                    _sync_current()
                _fast.mem_free_async(dp, _LEGACY)
                ctx.live.pop(dp, None)
            else:
                _fast.mem_free(dp)
        except ia.IronAccelError as exc:
            import warnings

            warnings.warn(f"PyCUDA compat: freeing device memory failed: {exc}", stacklevel=3)
        return

    def free_here() -> None:
        if kind == _POOL:
            if ctx.nonblocking:
                _sync_current()
            _fast.mem_free_async(dp, _LEGACY)
            ctx.live.pop(dp, None)
        else:
            _fast.mem_free(dp)

    cleanup("device memory", ctx, free_here)


def _wrap(dp: Any, ctx: Context, kind: int) -> DeviceAllocation:
    a = _int_new(DeviceAllocation, dp)
    d = a.__dict__
    d["_dp"] = dp
    d["_ctx"] = ctx
    d["_kind"] = kind
    return a


def mem_alloc(bytes: int) -> DeviceAllocation:
    """`bytes` bytes of device memory in the current context."""
    ctx = _current("cuMemAlloc")
    if bytes.__class__ is not int or bytes <= 0:
        bytes = _size(bytes, "cuMemAlloc")
    try:
        # Tried: cuMemAlloc/cuMemFree by default (IRONACCEL_CUDA_PYCUDA_ALLOC=sync), since the pool's free on the
        # legacy stream leaves idle syncs slow (ironaccel-cuda/bench/experiments/probe_idle_sync.py):
        # mem_alloc(64 KiB).free() then lost to PyCUDA where the pool's beats it, interleaved runs
        # (ironaccel-cuda/bench/bench_pycuda_compat.py).
        if ctx.pools:
            dp = _fast.mem_alloc_async(bytes, _LEGACY)
            ctx.live[dp] = None
            return _wrap(dp, ctx, _POOL)
        return _wrap(_fast.mem_alloc(bytes), ctx, _SYNC)
    except ia.OutOfMemory:
        pass
    except ia.IronAccelError as exc:
        raise translate(exc, "cuMemAlloc") from None
    except (TypeError, OverflowError) as exc:
        raise bad_input("cuMemAlloc", exc) from None
    gc.collect()  # as PyCUDA does: collected allocations may free enough memory; then try once more
    ctx = _current("cuMemAlloc")
    try:
        if ctx.pools:
            dp = _fast.mem_alloc_async(bytes, _LEGACY)
            ctx.live[dp] = None
            return _wrap(dp, ctx, _POOL)
        return _wrap(_fast.mem_alloc(bytes), ctx, _SYNC)
    except ia.IronAccelError as exc:
        raise translate(exc, "cuMemAlloc") from None


def _size(value: Any, routine: str) -> int:
    """A byte count from an int-like; 0 and negative sizes are cuMemAlloc's CUDA_ERROR_INVALID_VALUE."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise bad_type(routine, f"a size in bytes must be an int, not {value!r}")
    n = value.__index__()
    if n <= 0:
        raise from_code(1, routine, f"cannot allocate {n} bytes")
    return n


def mem_alloc_pitch(width: int, height: int, access_size: int) -> tuple[DeviceAllocation, int]:
    """cuMemAllocPitch: (allocation, pitch in bytes)."""
    ctx = _current("cuMemAllocPitch")
    if access_size not in (4, 8, 16) or isinstance(access_size, bool):  # the driver's refusal, before it
        raise from_code(1, "cuMemAllocPitch")
    dp, pitch = guarded("cuMemAllocPitch", cu.alloc_pitch, width, height, access_size)
    return _wrap(dp, ctx, _SYNC), pitch


def mem_get_info() -> tuple[int, int]:
    """(free, total) bytes of the current context's device."""
    import ironaccel_cuda

    _current("cuMemGetInfo")
    free, total = guarded("cuMemGetInfo", ironaccel_cuda.current_device_memory_info)
    return int(free), int(total)


def mem_get_address_range(ptr: Any) -> tuple[int, int]:
    """(base, size) of the allocation holding `ptr`."""
    import ironaccel_cuda

    op = "cuMemGetAddressRange"
    _current(op)
    at = address(ptr, op)
    if not 0 <= at < 1 << 64:  # what the binding's CUdeviceptr conversion refuses
        raise bad_input(op, OverflowError(f"{at} is not a device address"))
    base, size = guarded(op, ironaccel_cuda.address_range, at)
    return int(base), int(size)


class PointerHolderBase:
    """Subclass it and implement `get_pointer()` to make your own allocation-like objects."""

    def get_pointer(self) -> int:
        raise NotImplementedError("PointerHolderBase subclasses implement get_pointer()")

    def __int__(self) -> int:
        return int(self.get_pointer())

    def __index__(self) -> int:
        return int(self.get_pointer())

    def as_buffer(self, size: int, offset: int = 0) -> memoryview:
        return _as_buffer(int(self.get_pointer()), size, offset)


def _as_buffer(base: int, size: Any, offset: Any) -> memoryview:
    size, offset = _flags(size, "as_buffer", "size"), _flags(offset, "as_buffer", "offset")
    addr = base + offset
    if size < 0 or addr <= 0 or addr + size > 1 << 64:
        raise invalid("as_buffer", f"bad address {addr:#x} or size {size}")
    try:
        return memoryview((ctypes.c_char * size).from_address(addr)).cast("B")
    except (OverflowError, ValueError) as exc:
        raise bad_input("as_buffer", exc) from None


# -- host buffers -------------------------------------------------------------------


def _nbytes(obj: Any, routine: str) -> int:
    if obj.__class__ is _ndarray:
        return obj.nbytes  # type: ignore[no-any-return]
    try:
        return memoryview(obj).nbytes
    except TypeError as exc:
        raise bad_input(routine, exc) from None


def _bytes_view(obj: Any, writable: bool, routine: str) -> memoryview:
    """A flat byte view of a contiguous (C or Fortran) host buffer, in memory order (refused if read-only
    when `writable`)."""
    try:
        mv = memoryview(obj)
        view = None
        if mv.c_contiguous:
            view = mv.cast("B")
        elif mv.f_contiguous and isinstance(obj, np.ndarray):
            view = memoryview(obj.T).cast("B")
    except (TypeError, ValueError) as exc:
        raise bad_input(routine, exc) from None
    if view is None:
        raise invalid(routine, "the host buffer is not contiguous", BufferError)
    if writable and view.readonly:
        raise invalid(routine, "the destination buffer is read-only", BufferError)
    return view


def _u8_array(obj: Any, writable: bool, routine: str) -> np.ndarray:
    """A 1-D uint8 ndarray over the same memory as contiguous host buffer `obj`."""
    return np.frombuffer(_bytes_view(obj, writable, routine), np.uint8)


# -- staging -----------------------------------------------------------------------------

_BOUNCE_HALF = 4  # slots per half of the ring
_BOUNCE_SLOT = 64 << 10
_ensure = _fast.ensure
_dtoh_sync = _fast.memcpy_dtoh_sync


class Staging:
    """A context's page-locked slots for small synchronous copies.

    Host-to-device copies take the ring's slots in turn (`ring`, the compiled
    core's `HtodRing`): the bytes are copied into the slot and the DMA from it
    is queued, so the call returns as soon as the caller's buffer may be
    reused (cuMemcpyHtoD's guarantee).  The ring has two halves with one event
    each, recorded after a half's last DMA and waited on before that half is
    filled again.  (Small device-to-host copies go through the compiled core's
    bounce buffer: `memcpy_dtoh`.)
    """

    def __init__(self) -> None:
        size = 2 * _BOUNCE_HALF * _BOUNCE_SLOT
        self.base = guarded("cuMemHostAlloc", cu.host_alloc, size)  # portable; known to ironaccel as pinned
        self.events: list[int] = []
        try:
            for _ in range(2):
                self.events.append(_fast.event_create(CU_EVENT_DISABLE_TIMING))
            self.ring = _fast.HtodRing(self.base, _BOUNCE_SLOT, _BOUNCE_HALF, self.events[0], self.events[1],
                                       _LEGACY)
        except BaseException as exc:  # give back what was made: nothing else holds it
            for e in self.events:
                _fast.event_destroy(e)
            try:
                cu.host_free(self.base)
            except ia.IronAccelError:
                pass
            if isinstance(exc, ia.IronAccelError):
                raise translate(exc, "cuEventCreate") from None
            raise

    def close(self) -> None:
        """Free the slots and events (the context must be current)."""
        self.ring.close()
        try:
            _fast.stream_sync(_LEGACY)
        finally:
            for e in self.events:
                _fast.event_destroy(e)
            guarded("cuMemFreeHost", cu.host_free, self.base)


def _staging(ctx: Context) -> Staging:
    st: Staging | None = ctx.staging
    if st is None:
        with ctx.lock:
            st = ctx.staging
            if st is None:
                st = ctx.staging = Staging()
    return st


_pipeline_min: int | None = None


def _pipeline_threshold() -> int:
    global _pipeline_min
    if _pipeline_min is None:
        from ironaccel_cuda import transfer

        _pipeline_min = int(transfer.settings()["pipeline_min"])
    return _pipeline_min


_ia_devices: dict[int, Any] = {}


def ironaccel_device(ordinal: int) -> Any:
    """ironaccel's Device for `ordinal` (opened once); the caller binds its own context again afterwards."""
    dev = _ia_devices.get(ordinal)
    if dev is None:
        import ironaccel_cuda

        dev = _ia_devices[ordinal] = ironaccel_cuda.Device(ordinal)
    return dev


def _pipelined(ctx: Context, dest: DeviceAllocation | int, host: np.ndarray, to_device: bool) -> None:
    """A large pageable copy through ironaccel's staging pipeline, after the context's earlier work."""
    from ironaccel_cuda import memory

    _sync_current()
    try:
        buf: Any = memory.adopt(int(dest), host.nbytes, "uint8", ironaccel_device(ctx._ordinal))
        try:
            if to_device:
                buf.copy_from(host)
            else:
                buf.copy_to_host(out=host)
        finally:
            buf.close()
    except ia.IronAccelError as exc:
        raise translate(exc, "cuMemcpyHtoD" if to_device else "cuMemcpyDtoH") from None
    finally:
        _bind_top()


def _pool_memory(dest: Any) -> bool:
    return dest.__class__ is DeviceAllocation and dest.__dict__.get("_kind") == _POOL


# -- copies -------------------------------------------------------------------------------


def memcpy_htod(dest: Any, src: Any) -> None:
    """Copy host buffer `src` to device address `dest`; returns once `src` may be reused."""
    # The common small case first, inline, as in memcpy_dtoh: an ndarray of at most one slot, a valid context
    # on top of the stack that has its slots already.  The whole path through Python costs many times the bare
    # queued DMA of a 1 KiB copy.
    stack = _local.stack
    if stack and src.__class__ is _ndarray:
        top = stack[-1]
        n = src.nbytes
        st = top.staging
        if st is not None and top._valid and 0 < n <= _BOUNCE_SLOT:
            try:
                _ensure(top.handle)
                # Tried: cuMemcpyHtoDAsync straight from the source up to 16 KiB: faster than the ring at 1 KiB
                # (ironaccel-cuda/bench/experiments/ab_htod.py), but from page-locked memory it returns before the
                # DMA reads: needs a check.
                st.ring.copy(dest, src, n)
                return
            except ia.IronAccelError as exc:
                raise translate(exc, "cuMemcpyHtoD") from None
            except (TypeError, ValueError, OverflowError, BufferError):
                pass  # nothing was queued; the full path below says what is wrong
    ctx = _current("cuMemcpyHtoD")
    n = _nbytes(src, "cuMemcpyHtoD")
    try:
        if n <= _BOUNCE_SLOT:
            if n:
                _staging(ctx).ring.copy(dest, _bytes_view(src, False, "cuMemcpyHtoD"), n)
            return
        if n >= _pipeline_threshold() and _pool_memory(dest):
            _pipelined(ctx, dest, _u8_array(src, False, "cuMemcpyHtoD"), True)
            return
        _fast.memcpy_htod(dest, src, n, _LEGACY)
        _fast.stream_sync(_LEGACY)
    except ia.IronAccelError as exc:
        raise translate(exc, "cuMemcpyHtoD") from None
    except (TypeError, ValueError, OverflowError, BufferError) as exc:
        raise bad_input("cuMemcpyHtoD", exc) from None


def memcpy_dtoh(dest: Any, src: Any) -> None:
    """Copy from device address `src` into writable host buffer `dest`; returns once the data is there."""
    # The common small case first, inline: an ndarray of at most one bounce slot, a valid context on top of the
    # stack.  Through `_current` and `_nbytes` it was measurably slower per call.
    stack = _local.stack
    if stack and dest.__class__ is _ndarray:
        top = stack[-1]
        n = dest.nbytes
        if top._valid and 0 < n <= _BOUNCE_SLOT:
            try:
                _ensure(top.handle)
                _dtoh_sync(dest, src, n, _LEGACY, top._ordinal)
                return
            except ia.IronAccelError as exc:
                raise translate(exc, "cuMemcpyDtoH") from None
            except (TypeError, ValueError, OverflowError, BufferError):
                pass  # the full path below says what is wrong
    ctx = _current("cuMemcpyDtoH")
    n = _nbytes(dest, "cuMemcpyDtoH")
    try:
        if n <= _BOUNCE_SLOT:
            # The compiled core's bounce copy (its wait ends on a fence word).  A Python-side page-locked slot
            # and cuStreamSynchronize, used before, lost to PyCUDA at 1 KiB
            # (ironaccel-cuda/bench/bench_pycuda_compat.py).
            if n:
                try:
                    _fast.memcpy_dtoh_sync(dest, src, n, _LEGACY, ctx._ordinal)
                except (BufferError, ValueError):
                    _bytes_view(dest, True, "cuMemcpyDtoH")  # the surface's own error for a bad buffer
                    raise
            return
        if n >= _pipeline_threshold() and _pool_memory(src):
            _pipelined(ctx, src, _u8_array(dest, True, "cuMemcpyDtoH"), False)
            return
        _fast.memcpy_dtoh(dest, src, n, _LEGACY)
        _fast.stream_sync(_LEGACY)
    except ia.IronAccelError as exc:
        raise translate(exc, "cuMemcpyDtoH") from None
    except (TypeError, ValueError, OverflowError, BufferError) as exc:
        raise bad_input("cuMemcpyDtoH", exc) from None


def _stream_of(stream: Any, routine: str) -> Any:
    if stream is None:
        _current(routine)
        return _LEGACY
    try:
        return stream._h
    except AttributeError:
        raise bad_type(routine, f"stream must be a Stream or None, not {type(stream).__name__}") from None


def memcpy_htod_async(dest: Any, src: Any, stream: Any = None) -> None:
    """cuMemcpyHtoDAsync of host buffer `src` (page-locked for a truly asynchronous copy)."""
    s = _stream_of(stream, "cuMemcpyHtoDAsync")
    try:
        _fast.memcpy_htod(dest, src, _nbytes(src, "cuMemcpyHtoDAsync"), s)
    except ia.IronAccelError as exc:
        raise translate(exc, "cuMemcpyHtoDAsync") from None
    except (TypeError, ValueError, OverflowError, BufferError) as exc:
        raise bad_input("cuMemcpyHtoDAsync", exc) from None


def memcpy_dtoh_async(dest: Any, src: Any, stream: Any = None) -> None:
    """cuMemcpyDtoHAsync into host buffer `dest` (page-locked for a truly asynchronous copy)."""
    s = _stream_of(stream, "cuMemcpyDtoHAsync")
    try:
        _fast.memcpy_dtoh(dest, src, _nbytes(dest, "cuMemcpyDtoHAsync"), s)
    except ia.IronAccelError as exc:
        raise translate(exc, "cuMemcpyDtoHAsync") from None
    except (TypeError, ValueError, OverflowError, BufferError) as exc:
        raise bad_input("cuMemcpyDtoHAsync", exc) from None


def memcpy_dtod(dest: Any, src: Any, size: int) -> None:
    """cuMemcpyDtoD: ordered on the legacy stream, no host synchronization (as the driver's)."""
    memcpy_dtod_async(dest, src, size)


def memcpy_dtod_async(dest: Any, src: Any, size: int, stream: Any = None) -> None:
    s = _stream_of(stream, "cuMemcpyDtoDAsync")
    if size.__class__ is not int:  # the compiled call would truncate a float
        size = _flags(size, "cuMemcpyDtoD", "size")
    try:
        _fast.memcpy_dtod(dest, src, size, s)
    except ia.IronAccelError as exc:
        raise translate(exc, "cuMemcpyDtoD") from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise bad_input("cuMemcpyDtoD", exc) from None


def _ctx_handle(ctx: Context | None, routine: str) -> int:
    if ctx is None:
        return _current(routine).handle
    if not isinstance(ctx, Context):
        raise bad_type(routine, f"contexts must be Context objects, not {type(ctx).__name__}")
    return ctx.handle


def memcpy_peer(dest: Any, src: Any, size: int, dest_context: Context | None = None,
                src_context: Context | None = None) -> None:
    """cuMemcpyPeer between contexts (default: the current one for either side)."""
    op = "cuMemcpyPeer"
    dctx, sctx = _ctx_handle(dest_context, op), _ctx_handle(src_context, op)
    guarded(op, cu.copy_peer, address(dest, op), dctx, address(src, op), sctx, _flags(size, op, "size"))


def memcpy_peer_async(dest: Any, src: Any, size: int, dest_context: Context | None = None,
                      src_context: Context | None = None, stream: Any = None) -> None:
    op = "cuMemcpyPeerAsync"
    dctx, sctx = _ctx_handle(dest_context, op), _ctx_handle(src_context, op)
    s = _stream_of(stream, op)
    guarded(op, cu.copy_peer, address(dest, op), dctx, address(src, op), sctx, _flags(size, op, "size"), s)


# -- memsets (the driver's synchronous memsets are asynchronous to the host: same here) ------------


def _memset(fn: Any, routine: str, dest: Any, data: int, size: int, stream: Any) -> None:
    s = _stream_of(stream, routine)
    if data.__class__ is not int or size.__class__ is not int:  # the compiled call would truncate floats
        data, size = _flags(data, routine, "data"), _flags(size, routine, "size")
    try:
        fn(dest, data, size, s)
    except ia.IronAccelError as exc:
        raise translate(exc, routine) from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise bad_input(routine, exc) from None


def memset_d8(dest: Any, data: int, size: int) -> None:
    _memset(_fast.memset_d8, "cuMemsetD8", dest, data, size, None)


def memset_d16(dest: Any, data: int, size: int) -> None:
    _memset(_fast.memset_d16, "cuMemsetD16", dest, data, size, None)


def memset_d32(dest: Any, data: int, size: int) -> None:
    _memset(_fast.memset_d32, "cuMemsetD32", dest, data, size, None)


def memset_d8_async(dest: Any, data: int, size: int, stream: Any = None) -> None:
    _memset(_fast.memset_d8, "cuMemsetD8Async", dest, data, size, stream)


def memset_d16_async(dest: Any, data: int, size: int, stream: Any = None) -> None:
    _memset(_fast.memset_d16, "cuMemsetD16Async", dest, data, size, stream)


def memset_d32_async(dest: Any, data: int, size: int, stream: Any = None) -> None:
    _memset(_fast.memset_d32, "cuMemsetD32Async", dest, data, size, stream)


def _memset_2d(op: str, dest: Any, pitch: int, data: int, width: int, height: int, stream: Any) -> None:
    s = _stream_of(stream, op)
    pitch, data = _flags(pitch, op, "pitch"), _flags(data, op, "data")
    call(op, address(dest, op), pitch, data, _flags(width, op, "width"), _flags(height, op, "height"), s)


def memset_d2d8(dest: Any, pitch: int, data: int, width: int, height: int) -> None:
    _memset_2d("cuMemsetD2D8Async", dest, pitch, data, width, height, None)


def memset_d2d16(dest: Any, pitch: int, data: int, width: int, height: int) -> None:
    _memset_2d("cuMemsetD2D16Async", dest, pitch, data, width, height, None)


def memset_d2d32(dest: Any, pitch: int, data: int, width: int, height: int) -> None:
    _memset_2d("cuMemsetD2D32Async", dest, pitch, data, width, height, None)


def memset_d2d8_async(dest: Any, pitch: int, data: int, width: int, height: int, stream: Any = None) -> None:
    _memset_2d("cuMemsetD2D8Async", dest, pitch, data, width, height, stream)


def memset_d2d16_async(dest: Any, pitch: int, data: int, width: int, height: int, stream: Any = None) -> None:
    _memset_2d("cuMemsetD2D16Async", dest, pitch, data, width, height, stream)


def memset_d2d32_async(dest: Any, pitch: int, data: int, width: int, height: int, stream: Any = None) -> None:
    _memset_2d("cuMemsetD2D32Async", dest, pitch, data, width, height, stream)


# -- host memory ---------------------------------------------------------------------


def _layout(shape: Any, dtype: Any, order: str = "C") -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape as a tuple, dtype, size in bytes) of a host array request, checked before anything is allocated."""
    try:
        dims = [shape] if hasattr(shape, "__index__") else list(shape)
        dtype = np.dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise bad_input("numpy_empty", exc) from None
    shape = tuple(_flags(d, "numpy_empty", "an array dimension") for d in dims)
    if any(d < 0 for d in shape):
        raise invalid("numpy_empty", f"negative dimensions are not allowed: {shape}", ValueError)
    if dtype.hasobject:  # an object array over raw memory holds garbage pointers: reading it crashes
        raise bad_type("numpy_empty", f"dtype {dtype} holds Python objects, which raw memory cannot")
    if not isinstance(order, str) or order.upper() not in ("C", "F"):
        raise invalid("numpy_empty", f"unrecognized order specifier {order!r}")
    nbytes = dtype.itemsize
    for d in shape:
        nbytes *= d
    return shape, dtype, nbytes


def _interface(ptr: int, shape: tuple[int, ...], dtype: np.dtype, order: str) -> dict[str, Any]:
    iface: dict[str, Any] = {"shape": shape, "typestr": dtype.str, "data": (ptr, False), "version": 3}
    if dtype.fields is not None or dtype.subdtype is not None:
        iface["descr"] = dtype.descr
    if order.upper() == "F" and len(shape) > 1:
        strides, step = [], dtype.itemsize
        for dim in shape:
            strides.append(step)
            step *= dim
        iface["strides"] = tuple(strides)
    return iface


class HostPointer:
    """Host memory known to CUDA; `get_device_pointer()` is its address in device space."""

    __slots__ = ("_ptr", "_nbytes", "_ctx", "_valid", "__array_interface__", "__weakref__")
    _ptr: int
    _nbytes: int
    _ctx: Context | None
    _valid: bool
    __array_interface__: dict[str, Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise bad_type(type(self).__name__, "host memory comes from pagelocked_empty(), aligned_empty(), "
                                            "register_host_memory() or a PageLockedMemoryPool")

    def _setup(self, ptr: int, nbytes: int, ctx: Context | None) -> None:
        self._ptr = ptr
        self._nbytes = nbytes
        self._ctx = ctx
        self._valid = True

    def get_device_pointer(self) -> int:
        return int(guarded("cuMemHostGetDevicePointer", cu.host_device_pointer, self._ptr))

    def _array(self, shape: tuple[int, ...], dtype: np.dtype, order: str) -> np.ndarray:
        self.__array_interface__ = _interface(self._ptr, shape, dtype, order)
        return np.asarray(self)


class PagelockedHostAllocation(HostPointer):
    """Page-locked host memory (cuMemHostAlloc) under a numpy array from `pagelocked_empty`."""

    __slots__ = ()

    def free(self) -> None:
        """Free it now (arrays over it must not be used afterwards)."""
        if not self._valid:
            raise from_code(_INVALID_HANDLE, "pagelocked_host_allocation::free")
        self._valid = False
        _fast.pinned_remove(self._ptr)
        ptr = self._ptr
        if self._ctx is not None:
            cleanup("page-locked memory", self._ctx, lambda: guarded("cuMemFreeHost", cu.host_free, ptr))

    def get_flags(self) -> int:
        got = guarded("cuMemHostGetFlags", cu.host_flags, self._ptr)
        return sum(bit for name, bit in HOST_ALLOC_FLAGS if getattr(got, name))

    def __del__(self) -> None:
        if getattr(self, "_valid", False):
            try:
                self.free()
            except Exception:
                pass


HostAllocation = PagelockedHostAllocation


class AlignedHostAllocation(HostPointer):
    """Ordinary host memory at an aligned address, under a numpy array from `aligned_empty`."""

    __slots__ = ("_raw",)
    _raw: np.ndarray

    def free(self) -> None:
        """Mark it freed (the memory goes when the last array over it does)."""
        if not self._valid:
            raise from_code(_INVALID_HANDLE, "aligned_host_allocation::free")
        self._valid = False


class RegisteredHostMemory(HostPointer):
    """An existing host array page-locked by `register_host_memory`; `base` is that array."""

    __slots__ = ("_base",)
    _base: Any

    @property
    def base(self) -> Any:
        return self._base

    def unregister(self) -> None:
        if not self._valid:
            raise from_code(_INVALID_HANDLE, "registered_host_memory::free")
        self._valid = False
        _fast.pinned_remove(self._ptr)
        ptr = self._ptr
        if self._ctx is not None:
            cleanup("registered memory", self._ctx, lambda: guarded("cuMemHostUnregister", cu.host_unregister, ptr))

    free = unregister

    def __del__(self) -> None:
        if getattr(self, "_valid", False):
            try:
                self.unregister()
            except Exception:
                pass


# PyCUDA's host_alloc_flags and mem_host_register_flags, as ironaccel_cuda.host_alloc / host_register name them
HOST_ALLOC_FLAGS = (("portable", 0x1), ("mapped", 0x2), ("write_combined", 0x4))
HOST_REGISTER_FLAGS = (("portable", 0x1), ("mapped", 0x2), ("io_memory", 0x4), ("read_only", 0x8))


def host_flags(flags: Any, names: tuple[tuple[str, int], ...], routine: str) -> dict[str, bool]:
    """PyCUDA's flags int as keyword arguments (each named flag, False when its bit is clear); a bit the driver
    does not know is its CUDA_ERROR_INVALID_VALUE, as before."""
    flags = _flags(flags, routine)
    if not 0 <= flags < 1 << 32:
        raise bad_input(routine, OverflowError(f"flags {flags} do not fit an unsigned int"))
    if flags & ~sum(bit for _, bit in names):
        raise from_code(1, routine, f"unknown flags {flags:#x}")
    return {name: bool(flags & bit) for name, bit in names}


def _host_bytes(nbytes: int, routine: str) -> None:
    """What the driver and the binding said of a byte count ironaccel_cuda's host calls refuse themselves."""
    if nbytes == 0:  # the driver's CUDA_ERROR_INVALID_VALUE
        raise from_code(1, routine, "cannot page-lock 0 bytes")
    if nbytes >= 1 << 64:  # the binding's size_t
        raise bad_input(routine, OverflowError(f"{nbytes} bytes do not fit a size_t"))


def pagelocked_empty(shape: Any, dtype: Any, order: str = "C", mem_flags: int = 0) -> np.ndarray:
    """A numpy array in page-locked host memory (its `base` is the PagelockedHostAllocation)."""
    shape, dtype, nbytes = _layout(shape, dtype, order)
    kw = host_flags(mem_flags, HOST_ALLOC_FLAGS, "cuMemHostAlloc")
    _host_bytes(nbytes, "cuMemHostAlloc")
    ctx = _current("cuMemHostAlloc")
    ptr = guarded("cuMemHostAlloc", cu.host_alloc, nbytes, **kw)  # known to ironaccel's copies as pinned
    alloc = object.__new__(PagelockedHostAllocation)
    alloc._setup(ptr, nbytes, ctx)
    return alloc._array(shape, dtype, order)


def aligned_empty(shape: Any, dtype: Any, order: str = "C", alignment: int = 4096) -> np.ndarray:
    """A numpy array whose data starts at a multiple of `alignment` bytes."""
    shape, dtype, nbytes = _layout(shape, dtype, order)
    alignment = _flags(alignment, "aligned_empty", "alignment")
    if alignment <= 0:
        raise invalid("aligned_empty", f"alignment must be positive, got {alignment}")
    raw = np.empty(nbytes + alignment, np.uint8)
    address = raw.__array_interface__["data"][0]
    offset = (-address) % alignment
    alloc = object.__new__(AlignedHostAllocation)
    alloc._setup(address + offset, nbytes, None)
    alloc._raw = raw
    return alloc._array(shape, dtype, order)


def register_host_memory(ary: Any, flags: int = 0) -> np.ndarray:
    """Page-lock the memory of C-contiguous array `ary`; returns an array over it whose base unregisters."""
    if not isinstance(ary, np.ndarray):
        raise invalid("register_host_memory", "ary argument is not a numpy array")
    if not ary.flags.c_contiguous:
        raise invalid("register_host_memory", "ary argument is not contiguous")
    ptr, nbytes = ary.__array_interface__["data"][0], ary.nbytes
    kw = host_flags(flags, HOST_REGISTER_FLAGS, "cuMemHostRegister")
    _host_bytes(nbytes, "cuMemHostRegister")
    ctx = _current("cuMemHostRegister")
    guarded("cuMemHostRegister", cu.host_register, ptr, nbytes, **kw)  # known to ironaccel's copies as pinned
    reg = object.__new__(RegisteredHostMemory)
    reg._setup(ptr, nbytes, ctx)
    reg._base = ary
    return reg._array(ary.shape, ary.dtype, "C")


class ManagedAllocation:
    """Managed (unified) memory from `managed_empty`; int() is its address, valid on host and device."""

    __slots__ = ("_ptr", "_ctx", "_valid", "__array_interface__", "__weakref__")
    _ptr: int
    _ctx: Context
    _valid: bool
    __array_interface__: dict[str, Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise bad_type("ManagedAllocation", "managed memory comes from managed_empty()")

    def __int__(self) -> int:
        return self._ptr

    __index__ = __int__

    def get_device_pointer(self) -> int:
        return self._ptr

    def attach(self, mem_flags: int, stream: Any = None) -> None:
        """cuStreamAttachMemAsync: attach to `stream` (None: the legacy stream) with `mem_flags`."""
        s = _stream_of(stream, "cuStreamAttachMemAsync")
        mode = _ATTACH_MODES.get(mem_flags) if isinstance(mem_flags, int) and not isinstance(mem_flags, bool) \
            else None
        if mode is None:  # the driver's refusal, before it
            raise from_code(1, "cuStreamAttachMemAsync")
        guarded("cuStreamAttachMemAsync", cu.attach_address, self._ptr, s, mode=mode)

    def free(self) -> None:
        if not self._valid:
            raise from_code(_INVALID_HANDLE, "device_allocation::free")
        self._valid = False
        ptr = self._ptr
        cleanup("managed memory", self._ctx, lambda: guarded("cuMemFree", cu.device_free, ptr))

    def __del__(self) -> None:
        if getattr(self, "_valid", False):
            try:
                self.free()
            except Exception:
                pass


def managed_empty(shape: Any, dtype: Any, order: str = "C", mem_flags: int = 0) -> np.ndarray:
    """A numpy array in managed memory (cuMemAllocManaged with `mem_flags`, a mem_attach_flags value)."""
    shape, dtype, nbytes = _layout(shape, dtype, order)
    ctx = _current("cuMemAllocManaged")
    attach = {1: "global", 2: "host"}.get(mem_flags) if isinstance(mem_flags, int) else None
    if attach is None or isinstance(mem_flags, bool):  # the driver's refusal (0 and SINGLE included), before it
        raise from_code(1, "cuMemAllocManaged")
    ptr = guarded("cuMemAllocManaged", cu.managed_alloc, nbytes, attach=attach)
    alloc = object.__new__(ManagedAllocation)
    alloc._ptr, alloc._ctx, alloc._valid = ptr, ctx, True
    alloc.__array_interface__ = _interface(ptr, shape, dtype, order)
    return np.asarray(alloc)


def is_pinned_array(ary: Any) -> bool:
    """True for numpy arrays made by pagelocked_empty / register_host_memory (their memory is page-locked)."""
    return isinstance(getattr(ary, "base", None), (PagelockedHostAllocation, RegisteredHostMemory))


# -- IPC ------------------------------------------------------------------------------------


def mem_get_ipc_handle(devptr: Any) -> bytearray:
    """cuIpcGetMemHandle: the 64-byte handle another process opens with IPCMemoryHandle."""
    _current("cuIpcGetMemHandle")
    try:
        handle = guarded("cuIpcGetMemHandle", ipc.memory_handle, address(devptr, "cuIpcGetMemHandle"))
    except ia.IronAccelError as exc:
        if _pool_memory(devptr):
            exc.args = (f"{exc} (this memory comes from the stream-ordered pool, which legacy IPC cannot export; "
                        f"set IRONACCEL_CUDA_PYCUDA_ALLOC=sync before importing for cuMemAlloc memory)",)
            exc.text = exc.args[0]  # type: ignore[attr-defined]
        raise
    return bytearray(handle)


def handle_data(data: Any, routine: str) -> bytes:
    """The bytes of an IPC handle PyCUDA was given (a bytearray), checked as PyCUDA checks them."""
    if not isinstance(data, (bytearray, bytes)):
        raise invalid(routine, "argument is not a bytes array")
    if len(data) != ipc.HANDLE_SIZE:
        raise invalid(routine, "handle has the wrong size")
    return bytes(data)


class IPCMemoryHandle(int):
    """Memory of another process opened from its IPC handle; the object is the device address."""

    def __new__(cls, handle: Any, flags: int = 1) -> IPCMemoryHandle:
        op = "cuIpcOpenMemHandle"
        data = handle_data(handle, op)
        flags = _flags(flags, op)
        if flags & ~CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS:  # the driver's CUDA_ERROR_INVALID_VALUE
            raise from_code(1, op, f"unknown flags {flags:#x}")
        ctx = _current(op)
        dp = guarded(op, ipc.open_memory_handle, data, lazy_peer_access=bool(flags))
        obj = _int_new(cls, int(dp))
        obj.__dict__.update(_ctx=ctx, _open=True)
        return obj

    def close(self) -> None:
        d = self.__dict__
        if not d.get("_open"):
            return
        d["_open"] = False
        ptr = int(self)
        cleanup("IPC memory", d["_ctx"], lambda: guarded("cuIpcCloseMemHandle", ipc.close_memory_handle, ptr))

    def __del__(self) -> None:
        if self.__dict__.get("_open"):
            try:
                self.close()
            except Exception:
                pass

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise bad_type("IPCMemoryHandle", "pass the handle bytes (mem_get_ipc_handle) between processes instead")


# -- 2-D and 3-D copies ---------------------------------------------------------------------


def _field(name: str, kind: str) -> property:
    def get(self: Any) -> Any:
        value = getattr(self._c, name)
        if kind == "memtype":
            return memory_type(int(value))
        if kind == "ptr":
            return int(value)
        return value

    def set(self: Any, value: Any) -> None:
        if kind == "memtype":
            value = enum_value("CUmemorytype", value, "Memcpy2D")
        elif kind == "ptr":
            value = address(value, "Memcpy2D")
        else:
            value = _flags(value, "Memcpy2D", name)  # cuda.bindings would truncate a float
        try:
            setattr(self._c, name, value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise bad_input("Memcpy2D", exc) from None

    return property(get, set)


_FIELDS_2D = {
    "src_x_in_bytes": ("srcXInBytes", "int"), "src_y": ("srcY", "int"),
    "src_memory_type": ("srcMemoryType", "memtype"), "src_device": ("srcDevice", "ptr"),
    "src_pitch": ("srcPitch", "int"),
    "dst_x_in_bytes": ("dstXInBytes", "int"), "dst_y": ("dstY", "int"),
    "dst_memory_type": ("dstMemoryType", "memtype"), "dst_device": ("dstDevice", "ptr"),
    "dst_pitch": ("dstPitch", "int"),
    "width_in_bytes": ("WidthInBytes", "int"), "height": ("Height", "int"),
}
_FIELDS_3D = {
    **_FIELDS_2D,
    "src_z": ("srcZ", "int"), "src_lod": ("srcLOD", "int"), "src_height": ("srcHeight", "int"),
    "dst_z": ("dstZ", "int"), "dst_lod": ("dstLOD", "int"), "dst_height": ("dstHeight", "int"),
    "depth": ("Depth", "int"),
}


class _CopyBase:
    """The setters common to Memcpy2D and Memcpy3D; host buffers are kept alive by the copy object."""

    _c: Any
    _keep: dict[str, Any]

    def _memtype(self, side: str, kind: str) -> None:
        from cuda.bindings import driver

        setattr(self._c, f"{side}MemoryType", getattr(driver.CUmemorytype, f"CU_MEMORYTYPE_{kind}"))

    def set_src_host(self, buf: Any) -> None:
        addr, nbytes = _address(buf, False, "set_src_host")
        self._memtype("src", "HOST")
        self._keep["src"] = (buf, nbytes)
        self._c.srcHost = addr

    def set_dst_host(self, buf: Any) -> None:
        addr, nbytes = _address(buf, True, "set_dst_host")
        self._memtype("dst", "HOST")
        self._keep["dst"] = (buf, nbytes)
        self._c.dstHost = addr

    def _check_host(self, routine: str) -> None:
        """Refuse a copy that would read or write past a host buffer (the driver does not check: it would crash)."""
        from cuda.bindings import driver

        c = self._c
        width, height, depth = int(c.WidthInBytes), int(c.Height), int(getattr(c, "Depth", 1))
        if not (width and height and depth):
            return
        for side in ("src", "dst"):
            kept = self._keep.get(side)
            if kept is None or getattr(c, f"{side}MemoryType") != driver.CUmemorytype.CU_MEMORYTYPE_HOST:
                continue
            pitch = int(getattr(c, f"{side}Pitch")) or width
            rows = int(getattr(c, f"{side}Y")) + height - 1
            if depth > 1 or int(getattr(c, f"{side}Z", 0)):
                rows += (int(getattr(c, f"{side}Z")) + depth - 1) * max(int(getattr(c, f"{side}Height")), height)
            end = int(getattr(c, f"{side}XInBytes")) + rows * pitch + width
            if end > kept[1]:
                raise invalid(routine, f"the copy reaches byte {end} of the {side} host buffer, which has "
                                       f"{kept[1]} bytes")

    def set_src_device(self, devptr: Any) -> None:
        self._memtype("src", "DEVICE")
        self._c.srcDevice = address(devptr, "set_src_device")

    def set_dst_device(self, devptr: Any) -> None:
        self._memtype("dst", "DEVICE")
        self._c.dstDevice = address(devptr, "set_dst_device")

    def set_src_unified(self, ptr: Any) -> None:
        self._memtype("src", "UNIFIED")
        self._c.srcDevice = address(ptr, "set_src_unified")

    def set_dst_unified(self, ptr: Any) -> None:
        self._memtype("dst", "UNIFIED")
        self._c.dstDevice = address(ptr, "set_dst_unified")

    def set_src_array(self, ary: Any) -> None:
        raise no_arrays("set_src_array")

    def set_dst_array(self, ary: Any) -> None:
        raise no_arrays("set_dst_array")


def _address(buf: Any, writable: bool, routine: str) -> tuple[int, int]:
    """(address, size in bytes) of contiguous host buffer `buf` (writable if `writable`), as PyCUDA requires."""
    view = _bytes_view(buf, writable, routine)
    if not view.nbytes:
        return 0, 0
    return int(np.frombuffer(view, np.uint8).__array_interface__["data"][0]), view.nbytes


def _run_copy(sync_op: str, async_op: str, copy: _CopyBase, stream: Any) -> None:
    copy._check_host(sync_op if stream is None else async_op)
    struct = copy._c
    if stream is None:
        _current(sync_op)
        call(sync_op, struct)
    else:
        call(async_op, struct, _stream_of(stream, async_op))


class Memcpy2D(_CopyBase):
    """A 2-D copy between host, device (and pitched) memory: set fields, then call it.

    `copy(aligned=False)` runs it synchronously (cuMemcpy2DUnaligned, or
    cuMemcpy2D when `aligned`); `copy(stream)` queues it on `stream`.
    """

    def __init__(self) -> None:
        from cuda.bindings import driver

        self._c = driver.CUDA_MEMCPY2D()
        self._keep = {}

    def __call__(self, stream_or_aligned: Any = None, aligned: bool = False) -> None:
        if stream_or_aligned is not None and hasattr(stream_or_aligned, "_h"):
            _run_copy("cuMemcpy2D", "cuMemcpy2DAsync", self, stream_or_aligned)
            return
        aligned = bool(stream_or_aligned) or aligned
        op = "cuMemcpy2D" if aligned else "cuMemcpy2DUnaligned"
        self._check_host(op)
        _current(op)
        call(op, self._c)


class Memcpy3D(_CopyBase):
    """A 3-D copy: set fields, then `copy()` (synchronous) or `copy(stream)`."""

    def __init__(self) -> None:
        from cuda.bindings import driver

        self._c = driver.CUDA_MEMCPY3D()
        self._keep = {}

    def __call__(self, stream: Any = None) -> None:
        _run_copy("cuMemcpy3D", "cuMemcpy3DAsync", self, stream)


class Memcpy3DPeer(_CopyBase):
    """A 3-D copy between contexts: also `set_src_context` / `set_dst_context`."""

    def __init__(self) -> None:
        from cuda.bindings import driver

        self._c = driver.CUDA_MEMCPY3D_PEER()
        self._keep = {}

    def set_src_context(self, ctx: Context) -> None:
        self._c.srcContext = _context_of(ctx, "set_src_context")

    def set_dst_context(self, ctx: Context) -> None:
        self._c.dstContext = _context_of(ctx, "set_dst_context")

    def __call__(self, stream: Any = None) -> None:
        _run_copy("cuMemcpy3DPeer", "cuMemcpy3DPeerAsync", self, stream)


def _context_of(ctx: Any, routine: str) -> Any:
    if not isinstance(ctx, Context):
        raise bad_type(routine, f"expected a Context, not {type(ctx).__name__}")
    if not ctx._valid:
        raise from_code(201, routine, "the context was detached")
    return ctx._h


for _cls, _fields in ((Memcpy2D, _FIELDS_2D), (Memcpy3D, _FIELDS_3D), (Memcpy3DPeer, _FIELDS_3D)):
    for _py, (_c_name, _kind) in _fields.items():
        setattr(_cls, _py, _field(_c_name, _kind))
