"""cuda.core's `weak_handle`: observe whether a Buffer's allocation is still held by anything.

A Buffer's allocation is what `Buffer.close()` and graph nodes share (see `_memory/_buffer.py`); the weak
handle is true while any holder remains: the Buffer until it is closed, and every graph node, clone or
executable graph that uses the memory, until the driver releases it.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

__all__ = ["WeakHandle", "weak_handle"]


class WeakHandle:
    """A weak reference to a shared allocation: false once every strong owner is gone."""

    __slots__ = ("_ref",)
    _ref: weakref.ref[Any]

    def __init__(self) -> None:
        raise RuntimeError("WeakHandle objects are made by weak_handle()")

    def expired(self) -> bool:
        """True once every strong owner of the allocation is gone."""
        return self._ref() is None

    def use_count(self) -> int:
        """How many owners share the allocation now (0 once expired)."""
        obj = self._ref()
        return 0 if obj is None else sys.getrefcount(obj) - 2  # less this call's and getrefcount's own

    def __bool__(self) -> bool:
        return self._ref() is not None

    def __repr__(self) -> str:
        return f"<WeakHandle {'expired' if self.expired() else 'alive'}>"


def weak_handle(obj: Any) -> WeakHandle:
    """A WeakHandle observing the allocation behind a Buffer (ValueError when it has none)."""
    from .._memory._buffer import Buffer

    if not isinstance(obj, Buffer):
        raise TypeError(f"weak_handle() does not support {type(obj).__name__!r}; supported types: Buffer")
    shared = obj._share()
    if shared is None:
        raise ValueError("Buffer has no active allocation")
    handle = object.__new__(WeakHandle)
    handle._ref = weakref.ref(shared)
    return handle
