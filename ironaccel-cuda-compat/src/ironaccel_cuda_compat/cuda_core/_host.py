"""cuda.core's `Host`: the CPU as a location for managed-memory operations (one object per location)."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

__all__ = ["Host"]


class Host:
    """`Host()`, `Host(numa_id=N)` or `Host.numa_current()`; equal arguments give the same object."""

    __slots__ = ("__weakref__", "_is_numa_current", "_numa_id")
    _is_numa_current: bool
    _numa_id: int | None

    _instances: ClassVar[dict[tuple[int | None, bool], Host]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __new__(cls, numa_id: int | None = None, *, is_numa_current: bool = False) -> Host:
        if is_numa_current and numa_id is not None:
            raise ValueError("numa_id and is_numa_current are mutually exclusive")
        if numa_id is not None and (isinstance(numa_id, bool) or not isinstance(numa_id, int) or numa_id < 0):
            raise ValueError(f"numa_id must be a non-negative int, got {numa_id!r}")
        key = (numa_id, bool(is_numa_current))
        with cls._lock:
            inst = cls._instances.get(key)
            if inst is None:
                inst = object.__new__(cls)
                inst._numa_id = numa_id
                inst._is_numa_current = bool(is_numa_current)
                cls._instances[key] = inst
        return inst

    @property
    def numa_id(self) -> int | None:
        return self._numa_id

    @property
    def is_numa_current(self) -> bool:
        return self._is_numa_current

    @classmethod
    def numa_current(cls) -> Host:
        return cls(is_numa_current=True)

    def __repr__(self) -> str:
        if self._is_numa_current:
            return "Host.numa_current()"
        return "Host()" if self._numa_id is None else f"Host(numa_id={self._numa_id})"

    def __reduce__(self) -> tuple[Any, ...]:
        if self._is_numa_current:
            return (Host.numa_current, ())
        return (Host, (self._numa_id,))
