"""MemPool: a caching allocator for the hot loop, opt-in and per stream.

    pool = dev.create_pool(stream)            # or dev.create_pool() for the default stream
    buf = pool.alloc(1024, "float32")        # a DeviceBuf, usable everywhere a DeviceBuf is
    buf.close()                              # back to this thread's cache, no driver call

Requests round up to a power-of-two bucket (at least `min_block` bytes).  The
warm path is a thread-local free list per bucket: no lock, no driver call.  A
thread list longer than `front_depth` spills half to shared lists under a
lock (bounded by `max_bytes`; beyond that blocks go back to the driver); an
empty thread list refills from the shared lists before asking the driver
(`cuMemAllocAsync` on the pool's stream).  Requests over `max_block` bytes go
straight to the driver and back on close.

Semantics: memory is stream-ordered on the pool's stream, as with CuPy's
pools.  A buffer may be closed from any thread.  A buffer used on another
stream must be ordered back onto the pool's stream (`pool.stream.wait(event)`)
before it is closed.  A buffer that outlives its pool is freed to the driver
when closed.  Two pools on the same stream never exchange blocks.
`stats()` reports hits, misses, bypasses and bytes; `trim()` returns cached
blocks to the driver; `close()` does that and retires the pool (idempotent).
`allocate` / `deallocate` are the allocator protocol (`allocator.Allocator`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from . import _core
from ._devices import open_device
from .allocator import deallocate
from .errors import closed, invalid

if TYPE_CHECKING:
    from .device import Device
    from .stream import Stream

__all__ = ["MemPool", "PoolStats"]


@dataclass(frozen=True)
class PoolStats:
    """A snapshot of a pool (exact when no thread is allocating at the time).

    hits: requests served from a cache; misses: bucket requests that went to
    the driver; bypass: requests over `max_block`; bytes_held / blocks_held:
    cached and free; bytes_reserved: bucket memory obtained from the driver
    and not yet given back; bytes_in_use = bytes_reserved - bytes_held.
    """

    hits: int
    misses: int
    bypass: int
    bytes_held: int
    blocks_held: int
    bytes_reserved: int
    bytes_in_use: int
    threads: int

    def to_dict(self) -> dict[str, int]:
        """The counters as a plain dict (JSON-ready, for reports)."""
        return asdict(self)


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class MemPool(_core.PoolCore):
    """Power-of-two bucket cache over stream-ordered allocation; see the module docstring.

    alloc(size, dtype="uint8") is the hot method, inherited from `_core.PoolCore`.
    """

    def __init__(self, device: Device, stream: Stream | None = None, *, max_block: int = 1 << 26,
                 max_bytes: int = 1 << 32, front_depth: int = 32, min_block: int = 256):
        op = "MemPool"
        open_device(device, op)
        for name, value in (("max_block", max_block), ("min_block", min_block)):
            if isinstance(value, bool) or not isinstance(value, int) or not _is_pow2(value):
                raise invalid(op, f"{name} must be a power of two, got {value!r}")
        if min_block > max_block:
            raise invalid(op, f"min_block {min_block} is larger than max_block {max_block}")
        if isinstance(front_depth, bool) or not isinstance(front_depth, int) or front_depth < 1:
            raise invalid(op, f"front_depth must be a positive int, got {front_depth!r}")
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise invalid(op, f"max_bytes must be a non-negative int, got {max_bytes!r}")
        st = device._state
        s = st.default_stream if stream is None else stream
        if getattr(s, "_ordinal", None) != device.ordinal:
            raise invalid(op, "the pool's stream must be a Stream of the same device")
        if s._h is _core.CLOSED:
            raise closed(op, "stream")
        super().__init__(s, st.default_stream._h, min_block=min_block, max_block=max_block,
                         front_depth=front_depth, max_bytes=max_bytes)
        self._attach(device, st.total_memory)

    def allocate(self, size: int, dtype: Any = "uint8", stream: Stream | None = None) -> Any:
        """The allocator protocol (`allocator.Allocator`): `alloc` on the pool's own stream.

        `stream` must be None or the pool's stream: a MemPool's blocks are ordered on that one stream.
        """
        if stream is not None:
            h, own = getattr(stream, "_h", None), self.stream._h
            if h is _core.CLOSED:
                raise closed("MemPool.allocate", "stream")
            if h is None or own is _core.CLOSED or int(h) != int(own):
                raise invalid("MemPool.allocate", "a MemPool allocates on its own stream (pool.stream); pass that "
                              "stream or None")
        return self.alloc(size, dtype)

    def deallocate(self, buf: Any, stream: Stream | None = None) -> None:
        """Free `buf` after the work queued on `stream` (default: the pool's stream); see `allocator.deallocate`."""
        deallocate(self, buf, stream, "MemPool.deallocate")

    def stats(self) -> PoolStats:
        """A snapshot of the pool's counters: cache hits and misses, bytes held, reserved and in use."""
        return PoolStats(**self.counters())

    def trim(self) -> int:
        """Give every cached block back to the driver; returns the bytes released."""
        return self.drain()

    @property
    def closed(self) -> bool:
        """Whether `close()` retired the pool (its cached blocks released)."""
        return self._closed

    def close(self) -> None:
        """Release every cached block and retire the pool.  Outstanding buffers free to the driver later."""
        if self._closed:
            return
        self._closed = True
        self.drain()

    def __enter__(self) -> MemPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<MemPool on cuda:{self.device.ordinal}{' closed' if self._closed else ''}>"
