"""PyCUDA's memory pools: DeviceMemoryPool on ironaccel's MemPool, PageLockedMemoryPool, bitlog2.

`DeviceMemoryPool` hands out blocks from an ironaccel `MemPool` made for the
pool's context: its warm path is the MemPool's per-thread free list (no lock,
no driver call), and its blocks are stream-ordered on the legacy default
stream of that context, so they are usable by every blocking stream there.
MemPool rounds to powers of two (PyCUDA's bins are finer: 16 per power of
two); `bin_number` / `alloc_size` still answer with PyCUDA's bins.  Blocks
are kept until `free_held()`/`stop_holding()`, as in PyCUDA, and on running
out of memory the pool collects garbage, gives its held blocks back and
tries again.  `PageLockedMemoryPool` keeps page-locked blocks by PyCUDA's
bins and hands them out as numpy arrays.
"""

from __future__ import annotations

import gc
import threading
from typing import Any

import numpy as np

from ironaccel import errors as ia

import ironaccel_cuda as cu

from . import _fast
from ._context import Context, _bind_top, _current, _local, guarded, run_in
from ._errors import bad_input, bad_type, from_code, invalid, translate
from ._memory import HOST_ALLOC_FLAGS, HostPointer, _layout, host_flags, ironaccel_device
from ._module import register_pointer_type

__all__ = ["bitlog2", "DeviceMemoryPool", "PooledDeviceAllocation", "PageLockedAllocator", "PageLockedMemoryPool",
           "PooledHostAllocation"]

_LEADING_BITS = 4


def bitlog2(v: int) -> int:
    """floor(log2(v)); 0 for 0."""
    return max(_count(v, "bitlog2").bit_length() - 1, 0)


def _count(value: Any, routine: str, limit: int = 64) -> int:
    """A non-negative int below 2**limit (a size, a bin number), as PyCUDA's unsigned C++ arguments take them."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise bad_type(routine, f"expected an int, not {value!r}")
    n = value.__index__()
    if n < 0 or n >> limit:
        raise invalid(routine, f"{n} is out of range for an unsigned {limit}-bit value", OverflowError)
    return n  # type: ignore[no-any-return]


def _shift_right(x: int, amount: int) -> int:
    return x >> amount if amount >= 0 else x << -amount


def _shift_left(x: int, amount: int) -> int:
    return x << amount if amount >= 0 else x >> -amount


def bin_number(size: int) -> int:
    """PyCUDA's bin of a request: the exponent and the 4 bits after the leading one."""
    size = _count(size, "memory_pool::bin_number")
    exponent = bitlog2(size)
    shifted = _shift_right(size, exponent - _LEADING_BITS)
    if size and not shifted & (1 << _LEADING_BITS):
        raise RuntimeError("memory_pool::bin_number: bitlog2 fault")
    return exponent << _LEADING_BITS | (shifted & ((1 << _LEADING_BITS) - 1))


def alloc_size(bin_nr: int) -> int:
    """The largest request in PyCUDA's bin `bin_nr` (the block size that bin allocates)."""
    bin_nr = _count(bin_nr, "memory_pool::alloc_size", 32)
    exponent, mantissa = bin_nr >> _LEADING_BITS, bin_nr & ((1 << _LEADING_BITS) - 1)
    if exponent >= 64:
        raise invalid("memory_pool::alloc_size", f"bin {bin_nr} holds blocks larger than 2**64 bytes", OverflowError)
    ones = _shift_left(1, exponent - _LEADING_BITS)
    if ones:
        ones -= 1
    head = _shift_left((1 << _LEADING_BITS) | mantissa, exponent - _LEADING_BITS)
    if ones & head:
        raise RuntimeError("memory_pool::alloc_size: bit-counting fault")
    return head | ones


class PooledDeviceAllocation(int):
    """A block from DeviceMemoryPool: an int (its address), `len()` its size; `free()` returns it."""

    def __new__(cls, *args: Any, **kwargs: Any) -> PooledDeviceAllocation:
        raise from_code(1, "PooledDeviceAllocation", "allocate blocks with DeviceMemoryPool.allocate()")

    def free(self) -> None:
        d = self.__dict__
        buf = d.get("_buf")
        if buf is None:
            return
        d["_buf"] = None
        d["_pool"]._give(buf, d["_size"])

    def __len__(self) -> int:
        return int(self.__dict__["_size"])

    def __del__(self) -> None:
        if self.__dict__.get("_buf") is not None:
            try:
                self.free()
            except Exception:
                pass

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise from_code(1, "PooledDeviceAllocation", "pooled allocations cannot be pickled or copied")

    def __repr__(self) -> str:
        return f"<PooledDeviceAllocation 0x{int(self):x} size={self.__dict__.get('_size')}>"


register_pointer_type(PooledDeviceAllocation)


class DeviceMemoryPool:
    """pycuda.tools.DeviceMemoryPool: a caching allocator for the current context (ironaccel's MemPool)."""

    def __init__(self, allocator: Any = None):
        import ironaccel_cuda

        ctx = _current("DeviceMemoryPool")
        try:
            dev = ironaccel_device(ctx._ordinal)
            legacy = ironaccel_cuda.Stream.from_handle(0, dev)  # the legacy stream of the context current at each call
            total = dev.total_memory
            self._pool = dev.create_pool(legacy, max_block=1 << max(total - 1, 1).bit_length(), max_bytes=total)
            self._max = int(total)
        except ia.IronAccelError as exc:
            raise translate(exc, "DeviceMemoryPool") from None
        finally:
            _bind_top()
        self._ctx: Context = ctx
        self._holding = True
        self._lock = threading.Lock()
        self.active_blocks = 0
        self.active_bytes = 0

    def allocate(self, size: int) -> PooledDeviceAllocation:
        size = _count(size, "memory_pool::allocate")
        nbytes = max(size, 1)
        if nbytes > self._max:  # more than the device has: out of memory, as cuMemAlloc says under PyCUDA
            raise from_code(2, "memory_pool::allocate", f"{nbytes} bytes is more than the device has ({self._max})")
        try:
            buf = self._alloc(nbytes)
        except ia.OutOfMemory:
            gc.collect()
            self.free_held()
            try:
                buf = self._alloc(nbytes)
            except ia.IronAccelError as exc:
                raise translate(exc, "memory_pool::allocate") from None
        except ia.IronAccelError as exc:
            raise translate(exc, "memory_pool::allocate") from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise bad_input("memory_pool::allocate", exc) from None
        block = int.__new__(PooledDeviceAllocation, buf.ptr)
        block.__dict__.update(_buf=buf, _pool=self, _size=int(size))
        with self._lock:
            self.active_blocks += 1
            self.active_bytes += int(size)
        return block

    def _alloc(self, nbytes: int) -> Any:
        ctx = self._ctx
        stack = _local.stack
        if stack and stack[-1] is ctx:
            _fast.ensure(ctx.handle)
            return self._pool.alloc(nbytes)
        out: list[Any] = []
        if not run_in(ctx, lambda: out.append(self._pool.alloc(nbytes))):
            raise from_code(201, "memory_pool::allocate", "the pool's context was detached")
        return out[0]

    def _give(self, buf: Any, size: int) -> None:
        with self._lock:
            self.active_blocks -= 1
            self.active_bytes -= size
        run_in(self._ctx, buf.close)  # back to the MemPool's cache (a driver call only if it spills)
        if not self._holding:
            run_in(self._ctx, self._pool.trim)

    @property
    def held_blocks(self) -> int:
        return int(self._pool.stats().blocks_held)

    @property
    def managed_bytes(self) -> int:
        return int(self._pool.stats().bytes_reserved)

    def bin_number(self, size: int) -> int:
        return bin_number(size)

    def alloc_size(self, bin_nr: int) -> int:
        return alloc_size(bin_nr)

    def free_held(self) -> None:
        """Give every held block back to the driver."""
        run_in(self._ctx, self._pool.trim)

    def stop_holding(self) -> None:
        """Free held blocks now and every block from now on when it is freed."""
        self._holding = False
        self.free_held()

    def __del__(self) -> None:
        try:
            run_in(self._ctx, self._pool.close)
        except Exception:
            pass


class PageLockedAllocator:
    """Allocates page-locked host memory with cuMemHostAlloc `flags` (host_alloc_flags)."""

    def __init__(self, flags: int = 0):
        self.flags = _count(flags, "PageLockedAllocator", 32)


class PooledHostAllocation(HostPointer):
    """A page-locked block from PageLockedMemoryPool under a numpy array; `free()` returns it to the pool."""

    __slots__ = ("_pool", "_size", "_bin")
    _pool: PageLockedMemoryPool
    _size: int
    _bin: int

    def free(self) -> None:
        if not self._valid:
            return
        self._valid = False
        self._pool._give(self._ptr, self._bin, self._size)

    def __len__(self) -> int:
        return int(self._size)

    def __del__(self) -> None:
        if getattr(self, "_valid", False):
            try:
                self.free()
            except Exception:
                pass


class PageLockedMemoryPool:
    """pycuda.tools.PageLockedMemoryPool: page-locked blocks in PyCUDA's bins, handed out as numpy arrays."""

    def __init__(self, allocator: PageLockedAllocator | None = None):
        self._flags = allocator.flags if allocator is not None else 0
        self._bins: dict[int, list[int]] = {}
        self._lock = threading.Lock()
        self._holding = True
        self.held_blocks = 0
        self.active_blocks = 0
        self.managed_bytes = 0
        self.active_bytes = 0
        self._ctx: Context | None = None

    def allocate(self, shape: Any, dtype: Any, order: str = "C") -> np.ndarray:
        shape, dtype, size = _layout(shape, dtype, order)
        bin_nr = bin_number(size)
        with self._lock:
            held = self._bins.get(bin_nr)
            ptr = held.pop() if held else None
            if ptr is not None:
                self.held_blocks -= 1
        if ptr is None:
            ptr = self._new_block(alloc_size(bin_nr))
        with self._lock:
            self.active_blocks += 1
            self.active_bytes += size
        block = object.__new__(PooledHostAllocation)
        block._setup(ptr, size, self._ctx)
        block._pool, block._size, block._bin = self, size, bin_nr
        return block._array(shape, dtype, order)

    def _new_block(self, nbytes: int) -> int:
        kw = host_flags(self._flags, HOST_ALLOC_FLAGS, "cuMemHostAlloc")
        ctx = _current("cuMemHostAlloc")
        if self._ctx is None:
            self._ctx = ctx
        try:  # known to ironaccel's copies as pinned until host_free
            ptr = guarded("cuMemHostAlloc", cu.host_alloc, nbytes, **kw)
        except ia.OutOfMemory:
            gc.collect()
            self.free_held()
            ptr = guarded("cuMemHostAlloc", cu.host_alloc, nbytes, **kw)
        with self._lock:
            self.managed_bytes += nbytes
        return ptr

    def _give(self, ptr: int, bin_nr: int, size: int) -> None:
        with self._lock:
            self.active_blocks -= 1
            self.active_bytes -= size
            if self._holding:
                self._bins.setdefault(bin_nr, []).append(ptr)
                self.held_blocks += 1
                return
        self._free_block(ptr, bin_nr)

    def _free_block(self, ptr: int, bin_nr: int) -> None:
        guarded("cuMemFreeHost", cu.host_free, ptr)
        with self._lock:
            self.managed_bytes -= alloc_size(bin_nr)

    def bin_number(self, size: int) -> int:
        return bin_number(size)

    def alloc_size(self, bin_nr: int) -> int:
        return alloc_size(bin_nr)

    def free_held(self) -> None:
        with self._lock:
            blocks = [(ptr, b) for b, ptrs in self._bins.items() for ptr in ptrs]
            self._bins.clear()
            self.held_blocks = 0
        for ptr, b in blocks:
            self._free_block(ptr, b)

    def stop_holding(self) -> None:
        self._holding = False
        self.free_held()

    def __del__(self) -> None:
        try:
            self.free_held()
        except Exception:
            pass
