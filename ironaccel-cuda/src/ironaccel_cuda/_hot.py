"""Every driver call on a hot path, as plain functions over driver handles.

CONTRACT (a compiled module with the same names may replace this one):

* Handles are opaque.  Make them only with `stream_handle`, `event_handle`,
  `devptr` and `function_handle` (from an integer address), or take them from
  `event_create`, `mem_alloc_async`, `mem_alloc`; pass them back unchanged.
  `to_int(h)` gives the address.  Here they are `cuda.bindings` handle objects
  (so the binding does not build one per call); a compiled module may use ints.
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
* `PoolCore` is the bucket cache behind `MemPool`: `take(nbytes)` and
  `give(entry)` touch only a thread-local list on the warm path; a block is
  an entry `(addr, dp, bucket)` made once and reused.
"""

from __future__ import annotations

import threading
from typing import Any

from cuda.bindings import driver as _d

from . import errors as _errors

__all__ = [
    "CLOSED",
    "stream_handle",
    "event_handle",
    "devptr",
    "function_handle",
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
    "PoolCore",
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

_NOT_READY = 600
_INVALID_CONTEXT = 201

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


def to_int(h: Any) -> int:
    return int(h)


# -- error path (cold) --------------------------------------------------------


def _fail(err: Any, op: str) -> None:
    raise _errors.driver_error(err, op)


def _recover(err: Any, stream: Any) -> bool:
    """After CUDA_ERROR_INVALID_CONTEXT: make `stream`'s context current; True to retry."""
    if err != _INVALID_CONTEXT:
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
    the warm path allocates nothing.  `take(nbytes) -> entry`;
    `give(entry)` returns it.  Bucket b holds blocks of exactly 2**b bytes;
    requests over `max_block` bytes bypass the buckets (bucket -1).  Warm
    path: pop/append on this thread's list for the bucket -- no lock, no
    driver call.  A list longer than `front_depth` spills half its blocks to
    the shared lists under `lock`; a thread whose list is empty looks there
    before asking the driver.  Blocks are stream-ordered on `stream` (an
    object whose `_h` is the handle; `fallback` is used once it is closed).
    `max_bytes` caps the bytes kept in the shared lists; beyond it, spilled
    blocks go back to the driver.
    """

    __slots__ = (
        "stream", "fallback", "min_shift", "max_block", "front_depth", "max_bytes",
        "closed", "lock", "_tls", "_shared", "_threads", "_released", "_shared_hits",
    )

    def __init__(self, stream: Any, fallback: Any, *, min_block: int, max_block: int, front_depth: int,
                 max_bytes: int):
        self.stream = stream
        self.fallback = fallback
        self.min_shift = (min_block - 1).bit_length()
        self.max_block = max_block
        self.front_depth = front_depth
        self.max_bytes = max_bytes
        self.closed = False
        self.lock = threading.Lock()
        self._tls = threading.local()
        nb = max_block.bit_length() + 1
        self._shared: list[list[Any]] = [[] for _ in range(nb)]
        self._threads: list[_ThreadCache] = []
        self._released = 0  # bytes handed back to the driver from buckets
        self._shared_hits = 0

    # warm path

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
        if b < 0 or self.closed:
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
        entry = buf._tag
        b = entry[2]
        if b < 0 or self.closed:
            self._release(entry[1])
            return
        try:
            lst = self._tls.cache.lists[b]
        except AttributeError:
            lst = self._new_thread().lists[b]
        lst.append(entry)
        if len(lst) > self.front_depth:
            self._spill(lst, b)

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

    def stats(self) -> dict[str, int]:
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
