"""The hot path in pure Python over `cuda.bindings.driver`: the reference implementation of `_hot`.

CONTRACT (`_hotc`, the optional compiled module, implements the same names;
`_hot` selects one of the two at import):

* `IMPLEMENTATION` is "python" or "compiled".
* Handles are opaque.  Make them only with `stream_handle`, `event_handle`,
  `devptr`, `function_handle` and `graph_exec_handle` (from an integer
  address), or take them from `event_create`, `mem_alloc_async`, `mem_alloc`;
  pass them back unchanged (also to `_driver.call`, which accepts both kinds).
  `to_int(h)` gives the address.  Here they are `cuda.bindings` handle objects
  (so the binding does not build one per call); the compiled module uses ints.
* `CLOSED` is the handle of a closed object.  Passing it where a handle is
  expected raises `TypeError` before any driver call; callers turn that into
  `ClosedError` on their (cold) error path.
* Host buffers (`host`) are objects with the buffer protocol (a C-contiguous
  numpy array) or integer addresses; sizes are byte counts.
* Success returns the documented value and allocates nothing beyond what the
  binding itself returns.  Failure raises the typed ironaccel error naming the
  driver call (`errors.driver_error`).  A call that takes a stream and fails
  with CUDA_ERROR_INVALID_CONTEXT (a thread with no current context) makes the
  stream's context current and retries once.
* No function queries or sets the current context, except `bind` (always
  sets) and `ensure` (sets unless this thread already has that context
  through `bind`/`ensure`).
* `disable(reason)` (called in a forked child) makes every function raise
  `InvalidState` naming its op, except the releases (`mem_free_async`,
  `mem_free`, `event_destroy`), which become no-ops so that closing objects
  inherited from the parent neither fails nor frees the parent's memory.
* The hot methods of the public classes live here, in base classes that the
  public classes extend with their cold methods: `StreamCore` (synchronize,
  query, wait, record), `EventCore` (record, synchronize, query, close),
  `BufCore` (`_wrap`, close, copy_from / copy_to_host for numpy arrays),
  `DeviceCore` (`_init`, alloc, create_event), `FunctionCore` (launch) and
  `PoolCore` (the MemPool's bucket cache and its alloc).  Their fields are
  listed in `CORE_FIELDS`; the subclasses add only cold attributes.  Errors
  found on a hot path are explained by cold methods of the subclass (named in
  each core's docstring).
* `buffer_class(cold)` returns the DeviceBuf class given the class holding
  its cold methods (`memory.DeviceBufMethods`): here a subclass of BufCore
  and `cold`; in the compiled module its own final type (an exact type with a
  free list, which is much cheaper to make), whose cold methods call `cold`'s.
  `set_types(buffer=DeviceBuf, event=Event)` names the classes that
  `DeviceCore.alloc`, `PoolCore.alloc` and `DeviceCore.create_event` return.
  `RELEASE_FREE_ASYNC`, `RELEASE_FREE_SYNC` and `RELEASE_IMPORTED` are the
  ways `_wrap` may be told to release memory (or None: a view).
* `pinned_add(ptr, nbytes)` / `pinned_remove(ptr)` tell the copy paths which
  host memory is page-locked by ironaccel; `staging_info()` describes the
  pageable copy pipeline (threads, chunk, slots).
"""

from __future__ import annotations

import bisect
import struct
import threading
from typing import Any

import numpy as np
from cuda.bindings import driver as _d

from ironaccel.errors import IronAccelError as _IronAccelError

from . import dtypes as _dtypes
from . import errors as _errors
from .errors import closed as _closed_error

IMPLEMENTATION = "python"

__all__ = [
    "IMPLEMENTATION",
    "CLOSED",
    "stream_handle",
    "event_handle",
    "devptr",
    "function_handle",
    "graph_exec_handle",
    "to_int",
    "bind",
    "ensure",
    "stream_sync",
    "stream_query",
    "stream_wait",
    "event_create",
    "event_destroy",
    "event_record",
    "event_sync",
    "event_query",
    "mem_alloc_async",
    "mem_free_async",
    "mem_alloc",
    "mem_free",
    "memcpy_htod",
    "memcpy_dtoh",
    "memcpy_dtod",
    "memset_d8",
    "memset_d16",
    "memset_d32",
    "launch",
    "graph_launch",
    "StreamCore",
    "EventCore",
    "BufCore",
    "DeviceCore",
    "FunctionCore",
    "PoolCore",
    "CORE_FIELDS",
    "set_types",
    "buffer_class",
    "RELEASE_FREE_ASYNC",
    "RELEASE_FREE_SYNC",
    "RELEASE_IMPORTED",
    "pinned_add",
    "pinned_remove",
    "staging_info",
    "disable",
]


class _Closed:
    """The handle of a closed object; the binding rejects it with TypeError."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<closed handle>"


CLOSED: Any = _Closed()

_CUstream = _d.CUstream
_CUevent = _d.CUevent
_CUdeviceptr = _d.CUdeviceptr
_CUfunction = _d.CUfunction
_CUgraphExec = _d.CUgraphExec
_ndarray = np.ndarray
_new = object.__new__

_NOT_READY = 600
_INVALID_CONTEXT = 201
_INVALID_VALUE = 1
_OUT_OF_MEMORY = 2
CU_EVENT_DISABLE_TIMING = 0x2
CU_MEMHOSTALLOC_PORTABLE = 0x1

# Driver entry points, bound once.  `disable` rebinds them in a forked child.
_cuCtxSetCurrent = _d.cuCtxSetCurrent
_cuCtxGetCurrent = _d.cuCtxGetCurrent
_cuStreamGetCtx = _d.cuStreamGetCtx
_cuStreamSynchronize = _d.cuStreamSynchronize
_cuStreamQuery = _d.cuStreamQuery
_cuStreamWaitEvent = _d.cuStreamWaitEvent
_cuEventCreate = _d.cuEventCreate
_cuEventDestroy = _d.cuEventDestroy
_cuEventRecord = _d.cuEventRecord
_cuEventSynchronize = _d.cuEventSynchronize
_cuEventQuery = _d.cuEventQuery
_cuMemAllocAsync = _d.cuMemAllocAsync
_cuMemFreeAsync = _d.cuMemFreeAsync
_cuMemAlloc = _d.cuMemAlloc
_cuMemFree = _d.cuMemFree
_cuMemcpyHtoDAsync = _d.cuMemcpyHtoDAsync
_cuMemcpyDtoHAsync = _d.cuMemcpyDtoHAsync
_cuMemcpyDtoDAsync = _d.cuMemcpyDtoDAsync
_cuMemsetD8Async = _d.cuMemsetD8Async
_cuMemsetD16Async = _d.cuMemsetD16Async
_cuMemsetD32Async = _d.cuMemsetD32Async
_cuLaunchKernel = _d.cuLaunchKernel
_cuGraphLaunch = _d.cuGraphLaunch
_cuMemHostGetFlags = _d.cuMemHostGetFlags

_BOUND = [name for name in list(globals()) if name.startswith("_cu")]


# -- handles ------------------------------------------------------------------


def stream_handle(addr: int) -> Any:
    return _CUstream(addr)


def event_handle(addr: int) -> Any:
    return _CUevent(addr)


def devptr(addr: int) -> Any:
    return _CUdeviceptr(addr)


def function_handle(addr: int) -> Any:
    return _CUfunction(addr)


def graph_exec_handle(addr: int) -> Any:
    return _CUgraphExec(addr)


def to_int(h: Any) -> int:
    return int(h)


# -- error path (cold) --------------------------------------------------------


def _fail(err: Any, op: str) -> None:
    raise _errors.driver_error(err, op)


def _recover(err: Any, stream: Any) -> bool:
    """After CUDA_ERROR_INVALID_CONTEXT (no current context) or CUDA_ERROR_INVALID_VALUE (another
    device's context current, seen on a two-GPU H200 host): make `stream`'s context current; True to retry."""
    if err != _INVALID_CONTEXT and err != _INVALID_VALUE:
        return False
    res = _cuStreamGetCtx(stream)
    if res[0]:
        return False
    current = _cuCtxGetCurrent()
    if not current[0] and int(current[1]) == int(res[1]):
        return False  # already current: retrying would not help
    if _cuCtxSetCurrent(res[1])[0]:
        return False
    _tls.ctx = res[1]
    return True


# -- context ------------------------------------------------------------------

_tls = threading.local()


def bind(ctx: Any) -> None:
    """Make `ctx` current on this thread (always calls cuCtxSetCurrent)."""
    err = _cuCtxSetCurrent(ctx)[0]
    if err:
        _fail(err, "cuCtxSetCurrent")
    _tls.ctx = ctx


def ensure(ctx: Any) -> None:
    """Make `ctx` current unless this thread already made it current through us."""
    if getattr(_tls, "ctx", None) is not ctx:
        bind(ctx)


# -- streams ------------------------------------------------------------------


def stream_sync(s: Any) -> None:
    err = _cuStreamSynchronize(s)[0]
    if err:
        if _recover(err, s):
            return stream_sync(s)
        _fail(err, "cuStreamSynchronize")


def stream_query(s: Any) -> bool:
    err = _cuStreamQuery(s)[0]
    if not err:
        return True
    if err == _NOT_READY:
        return False
    if _recover(err, s):
        return stream_query(s)
    _fail(err, "cuStreamQuery")
    return False


def stream_wait(s: Any, e: Any) -> None:
    err = _cuStreamWaitEvent(s, e, 0)[0]
    if err:
        if _recover(err, s):
            return stream_wait(s, e)
        _fail(err, "cuStreamWaitEvent")


# -- events -------------------------------------------------------------------


def event_create(flags: int) -> Any:
    """A new event in the current context (call `ensure` first)."""
    res = _cuEventCreate(flags)
    if res[0]:
        _fail(res[0], "cuEventCreate")
    return res[1]


def event_destroy(e: Any) -> None:
    err = _cuEventDestroy(e)[0]
    if err:
        _fail(err, "cuEventDestroy")


def event_record(e: Any, s: Any) -> None:
    err = _cuEventRecord(e, s)[0]
    if err:
        if _recover(err, s):
            return event_record(e, s)
        _fail(err, "cuEventRecord")


def event_sync(e: Any) -> None:
    err = _cuEventSynchronize(e)[0]
    if err:
        _fail(err, "cuEventSynchronize")


def event_query(e: Any) -> bool:
    err = _cuEventQuery(e)[0]
    if not err:
        return True
    if err == _NOT_READY:
        return False
    _fail(err, "cuEventQuery")
    return False


# -- memory -------------------------------------------------------------------


def mem_alloc_async(nbytes: int, s: Any) -> Any:
    res = _cuMemAllocAsync(nbytes, s)
    if res[0]:
        if _recover(res[0], s):
            return mem_alloc_async(nbytes, s)
        if res[0] == _OUT_OF_MEMORY:
            from ._driver import trim_after_oom

            trim_after_oom()
        _fail(res[0], "cuMemAllocAsync")
    return res[1]


def mem_free_async(dp: Any, s: Any) -> None:
    err = _cuMemFreeAsync(dp, s)[0]
    if err:
        if _recover(err, s):
            return mem_free_async(dp, s)
        _fail(err, "cuMemFreeAsync")


def mem_alloc(nbytes: int) -> Any:
    """Synchronous allocation in the current context (devices without memory pools)."""
    res = _cuMemAlloc(nbytes)
    if res[0]:
        _fail(res[0], "cuMemAlloc")
    return res[1]


def mem_free(dp: Any) -> None:
    err = _cuMemFree(dp)[0]
    if err:
        _fail(err, "cuMemFree")


def memcpy_htod(dp: Any, host: Any, nbytes: int, s: Any) -> None:
    err = _cuMemcpyHtoDAsync(dp, host, nbytes, s)[0]
    if err:
        if _recover(err, s):
            return memcpy_htod(dp, host, nbytes, s)
        _fail(err, "cuMemcpyHtoDAsync")


def memcpy_dtoh(host: Any, dp: Any, nbytes: int, s: Any) -> None:
    err = _cuMemcpyDtoHAsync(host, dp, nbytes, s)[0]
    if err:
        if _recover(err, s):
            return memcpy_dtoh(host, dp, nbytes, s)
        _fail(err, "cuMemcpyDtoHAsync")


def memcpy_dtod(dst: Any, src: Any, nbytes: int, s: Any) -> None:
    err = _cuMemcpyDtoDAsync(dst, src, nbytes, s)[0]
    if err:
        if _recover(err, s):
            return memcpy_dtod(dst, src, nbytes, s)
        _fail(err, "cuMemcpyDtoDAsync")


def memset_d8(dp: Any, value: int, count: int, s: Any) -> None:
    err = _cuMemsetD8Async(dp, value, count, s)[0]
    if err:
        if _recover(err, s):
            return memset_d8(dp, value, count, s)
        _fail(err, "cuMemsetD8Async")


def memset_d16(dp: Any, value: int, count: int, s: Any) -> None:
    err = _cuMemsetD16Async(dp, value, count, s)[0]
    if err:
        if _recover(err, s):
            return memset_d16(dp, value, count, s)
        _fail(err, "cuMemsetD16Async")


def memset_d32(dp: Any, value: int, count: int, s: Any) -> None:
    err = _cuMemsetD32Async(dp, value, count, s)[0]
    if err:
        if _recover(err, s):
            return memset_d32(dp, value, count, s)
        _fail(err, "cuMemsetD32Async")


# -- launch -------------------------------------------------------------------


def launch(f: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, smem: int, s: Any, params: int) -> None:
    """cuLaunchKernel with `params` the address of a packed void* array (0 for none)."""
    err = _cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, s, params, 0)[0]
    if err:
        if _recover(err, s):
            return launch(f, gx, gy, gz, bx, by, bz, smem, s, params)
        _fail(err, "cuLaunchKernel")


def graph_launch(exe: Any, s: Any) -> None:
    err = _cuGraphLaunch(exe, s)[0]
    if err:
        if _recover(err, s):
            return graph_launch(exe, s)
        _fail(err, "cuGraphLaunch")


# -- page-locked host memory and the pageable copy pipeline ---------------------

_pinned_lock = threading.Lock()
_pinned_starts: list[int] = []
_pinned_ends: dict[int, int] = {}


def pinned_add(ptr: int, nbytes: int) -> None:
    """Record [ptr, ptr + nbytes) as page-locked by ironaccel (PinnedBuf, `pinned()`)."""
    with _pinned_lock:
        if ptr not in _pinned_ends:
            bisect.insort(_pinned_starts, ptr)
        _pinned_ends[ptr] = ptr + nbytes


def pinned_remove(ptr: int) -> None:
    with _pinned_lock:
        if _pinned_ends.pop(ptr, None) is not None:
            del _pinned_starts[bisect.bisect_left(_pinned_starts, ptr)]


def _known_pinned(addr: int, nbytes: int) -> bool:
    i = bisect.bisect_right(_pinned_starts, addr) - 1
    return i >= 0 and addr + nbytes <= _pinned_ends.get(_pinned_starts[i], 0)


def _is_pinned(addr: int, nbytes: int) -> bool:
    """True if the driver can DMA [addr, addr + nbytes) directly: page-locked by us, or allocated page-locked
    by anyone (cuMemHostGetFlags fails for anything else, including pageable memory reachable through HMM)."""
    if _known_pinned(addr, nbytes):
        return True
    try:
        return not _cuMemHostGetFlags(addr)[0]
    except Exception:  # an unknown pointer is simply pageable
        return False


_staging_lock = threading.Lock()
_staging: dict[int, _Staging] = {}


_counts = {"pipeline": 0, "bounce": 0, "direct": 0}


def staging_info() -> dict[str, int]:
    """How pageable copies are staged (see `transfer`), and how many synchronous copies took each path."""
    from . import transfer

    return {**transfer.settings(), **_counts}


class _Staging:
    """One device's pinned staging slots, two events and copy threads for pageable copies.

    Made on the first large pageable copy and kept for the life of the process.
    The slots form two halves: while the DMA of one half runs, threads copy the
    next chunks into the other (numpy releases the GIL while copying).
    """

    def __init__(self, ctx: Any, chunk: int, slots: int, threads: int, split: int = 32):
        from concurrent.futures import ThreadPoolExecutor

        from ._driver import call

        self.chunk = chunk  # slot size
        self.split = max(1, split)
        self.threads = max(1, threads)
        self.half = max(1, slots // 2)
        total = 2 * self.half * chunk
        ensure(ctx)
        self.base = int(call("cuMemHostAlloc", total, CU_MEMHOSTALLOC_PORTABLE))
        raw = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * total).from_address(self.base))
        self.views = [raw[i * chunk:(i + 1) * chunk] for i in range(2 * self.half)]
        self.events = [event_create(CU_EVENT_DISABLE_TIMING) for _ in range(2)]
        self.lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="ironaccel-cuda-copy")

    def _chunk_for(self, nbytes: int) -> int:
        """About `split` chunks, 64 KiB at least, the slot size at most (see `transfer`)."""
        chunk = (nbytes // self.split + 0xFFFF) & ~0xFFFF
        return min(max(chunk, 0x10000), self.chunk)

    def _chunks(self, nbytes: int, chunk: int, wave: int) -> list[tuple[int, int, int]]:
        """[(slot, offset, length)] of wave `wave` (`half` chunks, alternating halves)."""
        first = wave * self.half
        out = []
        for i in range(self.half):
            off = (first + i) * chunk
            if off >= nbytes:
                break
            out.append(((wave % 2) * self.half + i, off, min(chunk, nbytes - off)))
        return out

    def htod(self, dst: int, src: np.ndarray, nbytes: int, s: Any) -> None:
        flat = src.reshape(-1).view(np.uint8)
        chunk = self._chunk_for(nbytes)
        waves = (nbytes + self.half * chunk - 1) // (self.half * chunk)
        views = self.views

        def copy_in(item: tuple[int, int, int]) -> None:
            slot, off, n = item
            np.copyto(views[slot][:n], flat[off:off + n])

        with self.lock:
            for w in range(waves):
                chunks = self._chunks(nbytes, chunk, w)
                if w >= 2:
                    event_sync(self.events[w % 2])  # the DMAs of wave w-2 left this half
                list(self.pool.map(copy_in, chunks))
                for slot, off, n in chunks:
                    memcpy_htod(_CUdeviceptr(dst + off), self.base + slot * self.chunk, n, s)
                event_record(self.events[w % 2], s)
            stream_sync(s)

    def dtoh(self, dst: np.ndarray, src: int, nbytes: int, s: Any) -> None:
        flat = dst.reshape(-1).view(np.uint8)
        chunk = self._chunk_for(nbytes)
        waves = (nbytes + self.half * chunk - 1) // (self.half * chunk)
        views = self.views

        def issue(w: int) -> list[tuple[int, int, int]]:
            chunks = self._chunks(nbytes, chunk, w)
            for slot, off, n in chunks:
                memcpy_dtoh(self.base + slot * self.chunk, _CUdeviceptr(src + off), n, s)
            event_record(self.events[w % 2], s)
            return chunks

        def copy_out(item: tuple[int, int, int]) -> None:
            slot, off, n = item
            np.copyto(flat[off:off + n], views[slot][:n])

        with self.lock:
            chunks = issue(0)
            for w in range(waves):
                following = issue(w + 1) if w + 1 < waves else None  # into the half copied out last round
                event_sync(self.events[w % 2])
                list(self.pool.map(copy_out, chunks))
                chunks = following


def _staging_for(buf: Any) -> _Staging:
    ordinal = buf._ordinal
    st = _staging.get(ordinal)
    if st is None:
        from . import transfer

        with _staging_lock:
            st = _staging.get(ordinal)
            if st is None:
                cfg = transfer.settings()
                st = _Staging(buf.device._state.ctx, cfg["chunk"], cfg["slots"], cfg["threads"], cfg["split"])
                _staging[ordinal] = st
    return st


def _pipeline_min() -> int:
    from . import transfer

    return transfer.settings()["pipeline_min"]


# -- the public classes' hot methods ---------------------------------------------

_BUF_TYPE: Any = None
_EVENT_TYPE: Any = None


def buffer_class(cold: type) -> type:
    """The DeviceBuf class: BufCore's fields and hot methods, then `cold`'s methods."""
    return type("DeviceBuf", (BufCore, cold), {"__slots__": (), "__doc__": BufCore.__doc__,
                                              "__module__": cold.__module__, "__qualname__": "DeviceBuf"})


def set_types(*, buffer: type, event: type) -> None:
    """The BufCore and EventCore subclasses (DeviceBuf, Event) that the cores' factories return."""
    global _BUF_TYPE, _EVENT_TYPE
    _BUF_TYPE = buffer
    _EVENT_TYPE = event


class StreamCore:
    """Stream's hot methods.  Cold helpers of the subclass: `_closed_error(op)`, `_bad_event(op, event)`."""

    __slots__ = ("_h", "_ordinal", "__weakref__")

    def synchronize(self) -> None:
        """Wait until all work queued on this stream has finished."""
        try:
            stream_sync(self._h)
        except TypeError:
            raise self._closed_error("cuStreamSynchronize") from None

    def query(self) -> bool:
        """True when all work queued on this stream has finished."""
        try:
            return stream_query(self._h)
        except TypeError:
            raise self._closed_error("cuStreamQuery") from None

    def wait(self, event: Any) -> None:
        """Make later work on this stream wait until `event` has completed."""
        try:
            stream_wait(self._h, event._h)
        except (TypeError, AttributeError):
            raise self._bad_event("cuStreamWaitEvent", event) from None

    def record(self, event: Any = None) -> Any:
        """Record `event` (or a new timing-off event) here; returns it."""
        if event is None:
            event = self.device.create_event()
        try:
            event_record(event._h, self._h)
        except (TypeError, AttributeError):
            raise self._bad_event("cuEventRecord", event) from None
        return event


class EventCore:
    """Event's hot methods.  Cold helpers of the subclass: `_bad(op, stream=None)`, `_rebind(exc)`."""

    __slots__ = ("_h", "_ordinal", "_default", "device", "timing", "__weakref__")

    @classmethod
    def _make(cls, h: Any, device: Any, timing: bool) -> Any:
        e = _new(cls)
        e._h = h
        e.device = device
        e._ordinal = device.ordinal
        e.timing = timing
        e._default = device._state.default_stream
        return e

    def record(self, stream: Any = None) -> None:
        """Record this event on `stream` (default: the device's default stream)."""
        s = self._default if stream is None else stream
        try:
            event_record(self._h, s._h)
        except (TypeError, AttributeError):
            raise self._bad("cuEventRecord", s) from None

    def synchronize(self) -> None:
        """Wait until the work before the last record has completed."""
        try:
            event_sync(self._h)
        except TypeError:
            raise self._bad("cuEventSynchronize") from None
        except _errors.InvalidState as exc:
            self._rebind(exc)
            event_sync(self._h)

    def query(self) -> bool:
        """True when the work before the last record has completed."""
        try:
            return event_query(self._h)
        except TypeError:
            raise self._bad("cuEventQuery") from None
        except _errors.InvalidState as exc:
            self._rebind(exc)
            return event_query(self._h)

    def close(self) -> None:
        """Destroy the event (pending work still completes).  Idempotent."""
        h = self._h
        self._h = CLOSED
        if h is not CLOSED:
            event_destroy(h)

    def __del__(self) -> None:
        if getattr(self, "_h", CLOSED) is not CLOSED:
            try:
                self.close()
            except Exception:
                pass


def _free_async(buf: Any) -> None:
    h = buf._stream._h
    if h is CLOSED:
        h = buf.device._state.default_stream._h
    mem_free_async(buf._dp, h)


def _free_sync(buf: Any) -> None:
    ensure(buf.device._state.ctx)
    mem_free(buf._dp)


def _release_imported(buf: Any) -> None:
    base = buf._base
    buf._base = None
    if base is not None:
        base[1].release()


RELEASE_FREE_ASYNC = _free_async
RELEASE_FREE_SYNC = _free_sync
RELEASE_IMPORTED = _release_imported


class BufCore:
    """Typed device memory.  `ptr` is the device address (None once closed).

    close(), copy_from(numpy array) and copy_to_host() are the hot methods,
    written here (which also frees a forgotten buffer when it is garbage
    collected); every other method comes from `memory.DeviceBufMethods`,
    including the cold helpers these call: `_copy_mismatch(op, arr, s,
    to_host=False)`, `_diagnose(op, s, arr=None, exc=None)`,
    `_copy_from_other(src, stream)`.
    """

    __slots__ = ("ptr", "nbytes", "size", "dtype", "device", "_ordinal", "_npdt", "_dp", "_stream", "_release",
                 "_tag", "_base", "_views", "__weakref__")

    @classmethod
    def _wrap(cls, dp: Any, size: int, dtype: Any, npdt: np.dtype, device: Any, stream: Any, release: Any,
              tag: Any = 0, base: Any = None) -> Any:
        """A buffer over `dp`; `release` is None (a view) or one of the RELEASE_* values."""
        b = _new(cls)
        b.ptr = to_int(dp)
        b.nbytes = size * npdt.itemsize
        b.size = size
        b.dtype = dtype
        b.device = device
        b._ordinal = device.ordinal
        b._npdt = npdt
        b._dp = dp
        b._stream = stream
        b._release = release
        b._tag = tag
        b._base = base
        b._views = None
        return b

    @property
    def closed(self) -> bool:
        return self.ptr is None

    def close(self) -> None:
        """Free the memory (stream-ordered on the home stream).  Idempotent; closes views too."""
        release = self._release
        self._release = None  # taken before any call: a racing close() sees None and frees nothing
        if self.ptr is None:
            return
        self.ptr = None
        views = self._views
        if views is not None:
            self._views = None
            for ref in views:
                view = ref()
                if view is not None:
                    view.close()
        if release is not None:
            release(self)

    def __del__(self) -> None:
        if getattr(self, "_release", None) is not None:
            try:
                self.close()
            except Exception:
                pass

    def copy_from(self, src: Any, stream: Any = None) -> None:
        """Copy a host array, another DeviceBuf (any device) or a foreign device array into this buffer.

        Sizes and dtypes must match exactly; host arrays must be C-contiguous.
        Synchronous without `stream`, asynchronous on `stream` with it (a host
        array then must stay alive and unchanged until the stream reaches the copy).
        """
        if src.__class__ is not _ndarray:
            self._copy_from_other(src, stream)
            return
        if stream is None:
            s, sync = self._stream, True
        else:
            s, sync = stream, False
        try:
            bad = (
                self.ptr is None
                or s._ordinal != self._ordinal
                or (src.dtype is not self._npdt and src.dtype != self._npdt)
                or src.nbytes != self.nbytes
                or (src.ndim > 1 and not src.flags.c_contiguous)
            )
        except AttributeError:
            bad = True
        if bad:
            raise self._copy_mismatch("cuMemcpyHtoDAsync", src, s)
        nbytes = self.nbytes
        try:
            if sync and nbytes >= _pipeline_min() and src.flags.c_contiguous and s._h is not CLOSED:
                if not _is_pinned(src.__array_interface__["data"][0], nbytes):
                    _staging_for(self).htod(self.ptr, src, nbytes, s._h)
                    _counts["pipeline"] += 1
                    return
            memcpy_htod(self._dp, src, nbytes, s._h)
            if sync:
                _counts["direct"] += 1
        except _IronAccelError:
            raise
        except (TypeError, ValueError, RuntimeError, BufferError) as exc:
            raise self._diagnose("cuMemcpyHtoDAsync", s, src, exc) from None
        if sync:
            stream_sync(s._h)

    def copy_to_host(self, out: Any = None, stream: Any = None) -> Any:
        """Copy into a new numpy array (1-D, `size` elements), or into `out`; returns the array.

        `out` must be a writeable C-contiguous array of the same dtype and byte
        size.  Synchronous without `stream`; with it, the array is filled when
        the stream reaches the copy.
        """
        if stream is None:
            s, sync = self._stream, True
        else:
            s, sync = stream, False
        if out is None:
            if self.ptr is None:
                raise _closed_error("cuMemcpyDtoHAsync", "buffer")
            out = np.empty(self.size, self._npdt)
            bad = False
        else:
            bad = (
                out.__class__ is not _ndarray
                or self.ptr is None
                or (out.dtype is not self._npdt and out.dtype != self._npdt)
                or out.nbytes != self.nbytes
                or (out.ndim > 1 and not out.flags.c_contiguous)
                or not out.flags.writeable
            )
        try:
            bad = bad or s._ordinal != self._ordinal
        except AttributeError:
            bad = True
        if bad:
            raise self._copy_mismatch("cuMemcpyDtoHAsync", out, s, to_host=True)
        nbytes = self.nbytes
        try:
            if sync and nbytes >= _pipeline_min() and out.flags.c_contiguous and s._h is not CLOSED:
                if not _is_pinned(out.__array_interface__["data"][0], nbytes):
                    _staging_for(self).dtoh(out, self.ptr, nbytes, s._h)
                    _counts["pipeline"] += 1
                    return out
            memcpy_dtoh(out, self._dp, nbytes, s._h)
            if sync:
                _counts["direct"] += 1
        except _IronAccelError:
            raise
        except (TypeError, ValueError, RuntimeError, BufferError) as exc:
            raise self._diagnose("cuMemcpyDtoHAsync", s, out, exc) from None
        if sync:
            stream_sync(s._h)
        return out


class DeviceCore:
    """Device's per-handle fields and its hot methods (alloc, create_event).

    Cold helpers of the subclass: `_size_arg(size, op)`, `_bad_size(size, nbytes, op)`, `_bad_stream(s, op)`.
    """

    __slots__ = ()  # Device keeps a __dict__ (its mixin has none either)

    def _init(self, st: Any) -> None:
        self._state = st
        self.ordinal = st.ordinal
        self._closed = False
        self._pools = []

    def create_event(self, timing: bool = False) -> Any:
        """A new event; `timing=True` enables `elapsed_ms` (slightly slower record/sync)."""
        if self._closed:
            raise _closed_error("cuEventCreate", "device")
        st = self._state
        ensure(st.ctx)
        return _EVENT_TYPE._make(event_create(0 if timing else CU_EVENT_DISABLE_TIMING), self, timing)

    def alloc(self, size: int, dtype: Any = "uint8", stream: Any = None) -> Any:
        """`size` elements of `dtype`, stream-ordered on `stream` (default: the default stream)."""
        if self._closed:
            raise _closed_error("cuMemAllocAsync", "device")
        try:
            dt, npdt, itemsize = _dtypes.SPECS[dtype]
        except (KeyError, TypeError):
            dt, npdt, itemsize = _dtypes.spec(dtype, "cuMemAllocAsync")
        if size.__class__ is not int:
            size = self._size_arg(size, "cuMemAllocAsync")
        nbytes = size * itemsize
        st = self._state
        if nbytes <= 0 or nbytes > st.total_memory:
            raise self._bad_size(size, nbytes, "cuMemAllocAsync")
        s = st.default_stream if stream is None else stream
        try:
            if s._ordinal != self.ordinal:
                raise self._bad_stream(s, "cuMemAllocAsync")
            if st.pools:
                dp = mem_alloc_async(nbytes, s._h)
                release = _free_async
            else:
                ensure(st.ctx)
                dp = mem_alloc(nbytes)
                release = _free_sync
        except (TypeError, AttributeError):
            raise self._bad_stream(s, "cuMemAllocAsync") from None
        return _BUF_TYPE._wrap(dp, size, dt, npdt, self, s, release)


class FunctionCore:
    """Function's hot method (launch).

    Cold helpers of the subclass: `_prepare(args) -> ArgPacker`, `_bad_stream(s)`,
    `_launch_error(s, exc, grid, block, smem)`.
    """

    __slots__ = ("_h", "_ordinal", "_default", "_reachable", "name", "_tls", "__weakref__")

    def launch(self, grid: Any, block: Any, *args: Any, stream: Any = None, shared_mem: int = 0) -> None:
        """Queue the kernel on `stream` (default: the device's default stream).

        `grid` and `block` are ints or (x, y, z) tuples; `shared_mem` is the
        dynamic shared memory per block in bytes.  Arguments: see the `launch`
        module docstring for how they map onto the kernel's parameters.
        """
        try:
            packer = self._tls.packers[tuple(map(type, args))]
        except (AttributeError, KeyError):
            packer = self._prepare(args)
        try:
            packer.pack(args)
        except (struct.error, AttributeError, TypeError, ValueError) as exc:
            from .launch import pack_error

            raise pack_error(args, exc, self.name) from None
        if grid.__class__ is int:
            gx, gy, gz = grid, 1, 1
        else:
            from .module import _dim3

            gx, gy, gz = _dim3(grid, "grid")
        if block.__class__ is int:
            bx, by, bz = block, 1, 1
        else:
            from .module import _dim3

            bx, by, bz = _dim3(block, "block")
        s = self._default if stream is None else stream
        try:
            if s._ordinal != self._ordinal:
                raise self._bad_stream(s)
            launch(self._h, gx, gy, gz, bx, by, bz, shared_mem, s._h, packer.params)
        except (TypeError, AttributeError, OverflowError) as exc:
            raise self._launch_error(s, exc, (gx, gy, gz), (bx, by, bz), shared_mem) from None


# -- the memory pool's bucket cache -------------------------------------------


class _ThreadCache:
    """One thread's front cache of one pool: a free list per bucket, and counters."""

    __slots__ = ("lists", "hits", "misses", "bypass", "reserved")

    def __init__(self, nbuckets: int):
        self.lists: list[list[Any]] = [[] for _ in range(nbuckets)]
        self.hits = 0
        self.misses = 0
        self.bypass = 0
        self.reserved = 0  # bytes this thread obtained from the driver for buckets


class PoolCore:
    """Power-of-two byte buckets in front of cuMemAllocAsync / cuMemFreeAsync.

    A block is an immutable entry `(addr, dp, bucket)`, made once when the
    driver hands the memory out and reused for the block's whole life, so
    the warm path allocates nothing but the buffer object.  `take(nbytes) ->
    entry`; `give(entry)` returns it.  Bucket b holds blocks of exactly 2**b
    bytes; requests over `max_block` bytes bypass the buckets (bucket -1).
    Warm path: pop/append on this thread's list for the bucket -- no lock, no
    driver call.  A list longer than `front_depth` spills half its blocks to
    the shared lists under `lock`; a thread whose list is empty looks there
    before asking the driver.  Blocks are stream-ordered on `stream` (an
    object whose `_h` is the handle; `fallback` is used once it is closed).
    `max_bytes` caps the bytes kept in the shared lists; beyond it, spilled
    blocks go back to the driver.  `_attach(device, total_memory)` enables
    `alloc`, which wraps a block in a DeviceBuf.

    Cold helpers of the subclass: `_size_arg(size, op)`, `_bad_size(size, nbytes, op)` (reached via `device`).
    """

    __slots__ = (
        "stream", "fallback", "device", "min_shift", "max_block", "front_depth", "max_bytes", "_closed", "lock",
        "_tls", "_shared", "_threads", "_released", "_shared_hits", "_total", "_ordinal", "_give",
    )

    def __init__(self, stream: Any, fallback: Any, *, min_block: int, max_block: int, front_depth: int,
                 max_bytes: int):
        self.stream = stream
        self.fallback = fallback
        self.device = None
        self.min_shift = (min_block - 1).bit_length()
        self.max_block = max_block
        self.front_depth = front_depth
        self.max_bytes = max_bytes
        self._closed = False
        self.lock = threading.Lock()
        self._tls = threading.local()
        nb = max_block.bit_length() + 1
        self._shared: list[list[Any]] = [[] for _ in range(nb)]
        self._threads: list[_ThreadCache] = []
        self._released = 0  # bytes handed back to the driver from buckets
        self._shared_hits = 0
        self._total = 0
        self._ordinal = -1
        self._give = self.give_buf  # bound once: DeviceBuf.close() calls it

    def _attach(self, device: Any, total_memory: int) -> None:
        self.device = device
        self._ordinal = device.ordinal
        self._total = total_memory

    # warm path

    def alloc(self, size: int, dtype: Any = "uint8") -> Any:
        """`size` elements of `dtype` from the pool (a DeviceBuf whose close() returns it here)."""
        if self._closed:
            raise _closed_error("MemPool.alloc", "pool")
        try:
            dt, npdt, itemsize = _dtypes.SPECS[dtype]
        except (KeyError, TypeError):
            dt, npdt, itemsize = _dtypes.spec(dtype, "MemPool.alloc")
        if size.__class__ is not int:
            size = self.device._size_arg(size, "MemPool.alloc")
        nbytes = size * itemsize
        if nbytes <= 0 or nbytes > self._total:
            raise self.device._bad_size(size, nbytes, "MemPool.alloc")
        entry = self.take(nbytes)
        b = _new(_BUF_TYPE)
        b.ptr = entry[0]
        b.nbytes = nbytes
        b.size = size
        b.dtype = dt
        b.device = self.device
        b._ordinal = self._ordinal
        b._npdt = npdt
        b._dp = entry[1]
        b._stream = self.stream
        b._release = self._give
        b._tag = entry
        b._base = None
        b._views = None
        return b

    def take(self, nbytes: int) -> tuple[int, Any, int]:
        """A block entry `(addr, dp, bucket)` of at least `nbytes` bytes."""
        try:
            t = self._tls.cache
        except AttributeError:
            t = self._new_thread()
        if nbytes > self.max_block:
            t.bypass += 1
            dp = mem_alloc_async(nbytes, self._handle())
            return (int(dp), dp, -1)
        b = (nbytes - 1).bit_length()
        if b < self.min_shift:
            b = self.min_shift
        try:
            entry = t.lists[b].pop()
        except IndexError:
            return self._take_slow(t, b)
        t.hits += 1
        return entry

    def give(self, entry: tuple[int, Any, int]) -> None:
        """Return a block entry from `take` (from any thread)."""
        b = entry[2]
        if b < 0 or self._closed:
            self._release(entry[1])
            return
        try:
            lst = self._tls.cache.lists[b]
        except AttributeError:
            lst = self._new_thread().lists[b]
        lst.append(entry)
        if len(lst) > self.front_depth:
            self._spill(lst, b)

    def give_buf(self, buf: Any) -> None:
        """`give` for a pooled DeviceBuf (its entry is `_tag`)."""
        self.give(buf._tag)

    # cold paths

    def _handle(self) -> Any:
        h = self.stream._h
        return self.fallback if h is CLOSED else h

    def _new_thread(self) -> _ThreadCache:
        t = _ThreadCache(len(self._shared))
        self._tls.cache = t
        with self.lock:
            self._threads.append(t)
        return t

    def _take_slow(self, t: _ThreadCache, b: int) -> tuple[int, Any, int]:
        with self.lock:
            shared = self._shared[b]
            if shared:
                self._shared_hits += 1
                t.hits += 1
                return shared.pop()
        dp = mem_alloc_async(1 << b, self._handle())
        t.misses += 1
        t.reserved += 1 << b
        return (int(dp), dp, b)

    def _spill(self, lst: list[Any], b: int) -> None:
        moved = []
        for _ in range(len(lst) // 2):
            try:
                moved.append(lst.pop(0))
            except IndexError:
                break
        size = 1 << b
        drop = []
        with self.lock:
            held = self._shared_bytes()
            for entry in moved:
                if held + size <= self.max_bytes:
                    self._shared[b].append(entry)
                    held += size
                else:
                    drop.append(entry)
            self._released += size * len(drop)
        for entry in drop:
            self._release(entry[1])

    def _shared_bytes(self) -> int:
        return sum(len(lst) << b for b, lst in enumerate(self._shared))

    def _release(self, dp: Any) -> None:
        mem_free_async(dp, self._handle())

    def drain(self) -> int:
        """Release every cached block to the driver; returns the bytes released."""
        released = 0
        with self.lock:
            lists = [t.lists for t in self._threads] + [self._shared]
            for per_bucket in lists:
                for b, lst in enumerate(per_bucket):
                    while True:
                        try:
                            entry = lst.pop()
                        except IndexError:
                            break
                        self._release(entry[1])
                        released += 1 << b
            self._released += released
        return released

    def counters(self) -> dict[str, int]:
        """The PoolStats fields, as a dict."""
        with self.lock:
            threads = list(self._threads)
            held = self._shared_bytes()
            blocks = sum(len(lst) for lst in self._shared)
            released = self._released
        hits = misses = bypass = reserved = 0
        for t in threads:
            hits += t.hits
            misses += t.misses
            bypass += t.bypass
            reserved += t.reserved
            for b, lst in enumerate(t.lists):
                n = len(lst)
                held += n << b
                blocks += n
        reserved -= released
        return {
            "hits": hits,
            "misses": misses,
            "bypass": bypass,
            "bytes_held": held,
            "blocks_held": blocks,
            "bytes_reserved": reserved,
            "bytes_in_use": reserved - held,
            "threads": len(threads),
        }


CORE_FIELDS = {
    "StreamCore": ("_h", "_ordinal"),
    "EventCore": ("_h", "_ordinal", "_default", "device", "timing"),
    "BufCore": ("ptr", "nbytes", "size", "dtype", "device", "_ordinal", "_npdt", "_dp", "_stream", "_tag", "_base",
                "_views"),
    "DeviceCore": ("_state", "ordinal", "_closed", "_pools"),
    "FunctionCore": ("_h", "_ordinal", "_default", "_reachable", "name"),
    "PoolCore": ("stream", "fallback", "device", "_closed"),
}


# -- fork ---------------------------------------------------------------------


# Releasing what the parent owns is impossible in a forked child; closing must still work (as a no-op).
_RELEASES = {"_cuMemFreeAsync", "_cuMemFree", "_cuEventDestroy"}


def disable(reason: str) -> None:
    """In a forked child: every entry point raises InvalidState, except releases, which do nothing."""
    g = globals()
    for name in _BOUND:
        g[name] = _released if name in _RELEASES else _disabled(name[1:], reason)


def _released(*args: Any) -> tuple[int]:
    return (0,)


def _disabled(op: str, reason: str) -> Any:
    def fail(*args: Any) -> Any:
        raise _errors.InvalidState(_errors.BACKEND, op, detail=reason)

    fail.__name__ = op
    return fail
