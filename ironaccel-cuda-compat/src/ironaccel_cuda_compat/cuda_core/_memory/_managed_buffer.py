"""cuda.core's `ManagedBuffer`: a Buffer of managed memory with property-style advice, prefetch and discard.

`read_mostly`, `preferred_location` and `accessed_by` read the driver's range
attributes each time (cuMemRangeGetAttribute) and write advice (cuMemAdvise);
nothing is mirrored in Python.  See `_managed_memory_ops` for the operations.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableSet
from typing import Any

from .._utils.cuda_utils import call, driver
from ._buffer import Buffer
from ._managed_location import _coerce_location
from ._managed_memory_ops import (
    _advise_one,
    _check_managed,
    _discard,
    _discard_prefetch,
    _prefetch,
    range_int_attribute,
)
from ._managed_memory_ops import _read_preferred_location as _read_preferred

__all__ = ["ManagedBuffer"]

_INT_SIZE = 4
_ADV = driver.CUmem_advise
_RANGE = driver.CUmem_range_attribute


def _check_open(buf: Buffer) -> None:
    if buf.is_closed:
        raise RuntimeError("Buffer has been closed")


def _get_int_attr(buf: Buffer, attribute: Any) -> int:
    """One 32-bit range attribute of `buf`'s bytes (cuMemRangeGetAttribute)."""
    _check_open(buf)
    return range_int_attribute(attribute, buf.handle, buf.size)



def _query_accessed_by(buf: Buffer) -> list[Any]:
    """The devices (and Host()) with accessed-by advice on `buf`'s range."""
    from .. import _ia
    from .._device import Device
    from .._host import Host

    _check_open(buf)
    n = _ia.device_count() + 1
    raw = call("cuMemRangeGetAttribute", n * _INT_SIZE, _RANGE.CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, buf.handle,
               buf.size)
    values = list(raw) if isinstance(raw, (list, tuple)) else [raw]
    return [Host() if int(v) == -1 else Device(int(v)) for v in values if int(v) >= -1]


class AccessedBySetProxy(MutableSet):  # type: ignore[type-arg]
    """A live set of a managed buffer's accessed-by locations: reads ask the driver, add/discard advise it."""

    __slots__ = ("_buf",)

    def __init__(self, buf: ManagedBuffer):
        self._buf = buf

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> set[Any]:
        return set(it)

    def __contains__(self, location: object) -> bool:
        from .._device import Device
        from .._host import Host

        if not isinstance(location, (Device, Host)):
            return False
        return location in _query_accessed_by(self._buf)

    def __iter__(self) -> Iterator[Any]:
        return iter(_query_accessed_by(self._buf))

    def __len__(self) -> int:
        return len(_query_accessed_by(self._buf))

    def add(self, location: Any) -> None:
        from .._device import Device
        from .._host import Host

        if not isinstance(location, (Device, Host)):
            raise TypeError(f"expected Device or Host, got {type(location).__name__}")
        _advise_one(self._buf, _ADV.CU_MEM_ADVISE_SET_ACCESSED_BY, location)

    def discard(self, location: Any) -> None:
        from .._device import Device
        from .._host import Host

        if not isinstance(location, (Device, Host)):
            return
        if isinstance(location, Host) and (location.numa_id is not None or location.is_numa_current):
            return  # never in the set: accessed-by advice takes only devices and the generic host
        _advise_one(self._buf, _ADV.CU_MEM_ADVISE_UNSET_ACCESSED_BY, location)

    def __repr__(self) -> str:
        return f"AccessedBySetProxy({set(_query_accessed_by(self._buf))!r})"


class ManagedBuffer(Buffer):
    """Managed (unified) memory: from `ManagedMemoryResource.allocate` or `ManagedBuffer.from_handle`."""

    __slots__ = ()

    @classmethod
    def from_handle(cls, ptr: Any, size: int, mr: Any = None, owner: Any = None, *,  # type: ignore[override]
                    stream: Any = None) -> Buffer:
        """A ManagedBuffer over managed memory at `ptr` (checked when an operation first uses it)."""
        return cls._init(ptr, size, mr, owner=owner, stream=stream)

    @property
    def read_mostly(self) -> bool:
        return _get_int_attr(self, _RANGE.CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY) != 0

    @read_mostly.setter
    def read_mostly(self, value: bool) -> None:
        _check_open(self)
        _advise_one(self, _ADV.CU_MEM_ADVISE_SET_READ_MOSTLY if value else _ADV.CU_MEM_ADVISE_UNSET_READ_MOSTLY, None)

    @property
    def preferred_location(self) -> Any:
        """The Device or Host of the preferred-location advice, or None."""
        _check_open(self)
        _check_managed(self)
        return _read_preferred(self)

    @preferred_location.setter
    def preferred_location(self, value: Any) -> None:
        _check_open(self)
        if value is None:
            _advise_one(self, _ADV.CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, None)
        else:
            _advise_one(self, _ADV.CU_MEM_ADVISE_SET_PREFERRED_LOCATION, value)

    @property
    def accessed_by(self) -> AccessedBySetProxy:
        _check_open(self)
        return AccessedBySetProxy(self)

    @accessed_by.setter
    def accessed_by(self, locations: Iterable[Any]) -> None:
        from .._device import Device
        from .._host import Host

        _check_open(self)
        target: set[Any] = set()
        for loc in locations:
            if not isinstance(loc, (Device, Host)):
                raise TypeError(f"accessed_by entries must be Device or Host, got {type(loc).__name__}")
            target.add(loc)
        for loc in target:
            spec = _coerce_location(loc)
            if spec is not None and spec.kind not in ("device", "host"):
                raise ValueError(f"advise {_ADV.CU_MEM_ADVISE_SET_ACCESSED_BY.name} does not support "
                                 f"location_type='{spec.kind}'")
        current = set(_query_accessed_by(self))
        for loc in current - target:
            _advise_one(self, _ADV.CU_MEM_ADVISE_UNSET_ACCESSED_BY, loc)
        for loc in target - current:
            _advise_one(self, _ADV.CU_MEM_ADVISE_SET_ACCESSED_BY, loc)

    def prefetch(self, location: Any, *, stream: Any) -> None:
        """Migrate the range to `location` (a Device or Host), queued on `stream`."""
        _prefetch(self, location, stream)

    def discard(self, *, stream: Any) -> None:
        """Discard the range's resident pages, queued on `stream` (the contents become undefined)."""
        _discard(self, stream)

    def discard_prefetch(self, location: Any, *, stream: Any) -> None:
        """Discard the range's pages and prefetch it to `location`, queued on `stream`."""
        _discard_prefetch(self, location, stream)
