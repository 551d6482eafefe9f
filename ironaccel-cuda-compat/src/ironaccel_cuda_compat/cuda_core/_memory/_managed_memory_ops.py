"""Managed-memory operations on Buffers: advice, prefetch, discard, singly and in batches (cuMemAdvise,
cuMemPrefetchAsync, cuMemPrefetchBatchAsync, cuMemDiscardBatchAsync, cuMemDiscardAndPrefetchBatchAsync).

A range must be managed memory: from a `ManagedMemoryResource` (pool memory,
which the driver's IS_MANAGED pointer attribute does not report), from ironaccel's
managed allocations, or any pointer the driver reports as managed.  Anything else
is a ValueError before the driver is asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ironaccel_cuda.allocator import host_ranges

from .._utils.cuda_utils import call, driver, pointer_attribute
from ._managed_location import _coerce_location, _LocSpec, _to_driver

__all__ = ["prefetch_batch", "discard_batch", "discard_prefetch_batch"]

_PREFERRED_KINDS = ("device", "host", "host_numa", "host_numa_current")
_ACCESSED_BY_KINDS = ("device", "host")


def _check_managed(buf: Any) -> None:
    from ._buffer import Buffer
    from ._managed_memory_resource import ManagedMemoryResource

    if not isinstance(buf, Buffer):
        raise TypeError(f"expected a Buffer, got {type(buf).__name__}")
    if buf.is_closed:
        raise RuntimeError("Buffer has been closed")
    if isinstance(buf._mr, ManagedMemoryResource):
        return
    found = host_ranges.find(buf.handle, buf.size)
    if found is not None and found[2] == "managed":
        return
    if not pointer_attribute(buf.handle, "is_managed"):
        raise ValueError(f"the buffer at {buf.handle:#x} is not a managed-memory allocation (use a "
                         "ManagedMemoryResource or cuMemAllocManaged memory)")


def _stream_of(stream: Any) -> Any:
    from .._stream import Stream_accept

    return Stream_accept(stream)


def _advise_one(buf: Any, advice: Any, location: Any) -> None:
    """cuMemAdvise(`advice`) over `buf` for `location` (a Device, a Host or None: the current device)."""
    from .._device import Device

    _check_managed(buf)
    name = advice.name
    if location is None:
        spec = _LocSpec("device", Device().device_id)
    else:
        spec = _coerce_location(location)  # type: ignore[assignment]
        allowed = _ACCESSED_BY_KINDS if "ACCESSED_BY" in name else _PREFERRED_KINDS
        if spec.kind not in allowed:
            raise ValueError(f"advise {name} does not support location_type='{spec.kind}'")
    call("cuMemAdvise", buf.handle, buf.size, advice, _to_driver(spec))


def _prefetch(buf: Any, location: Any, stream: Any) -> None:
    spec = _coerce_location(location)
    s = _stream_of(stream)
    _check_managed(buf)
    call("cuMemPrefetchAsync", buf.handle, buf.size, _to_driver(spec), 0, s._h)  # type: ignore[arg-type]


def _discard(buf: Any, stream: Any) -> None:
    s = _stream_of(stream)
    _check_managed(buf)
    call("cuMemDiscardBatchAsync", [driver.CUdeviceptr(buf.handle)], [buf.size], 1, 0, s._h)


def _discard_prefetch(buf: Any, location: Any, stream: Any) -> None:
    spec = _coerce_location(location)
    s = _stream_of(stream)
    _check_managed(buf)
    call("cuMemDiscardAndPrefetchBatchAsync", [driver.CUdeviceptr(buf.handle)], [buf.size], 1,
         [_to_driver(spec)], [0], 1, 0, s._h)  # type: ignore[arg-type]


def range_int_attribute(attribute: Any, ptr: Any, size: int) -> int:
    """A 32-bit cuMemRangeGetAttribute value.  cuda.bindings before 13.4 has no Python form of CUDA 13's
    PREFERRED_LOCATION_TYPE/_ID and LAST_PREFETCH_LOCATION_TYPE/_ID (TypeError "Unsupported attribute", seen with
    cuda.bindings 13.3.1): those are read from libcuda directly."""
    try:
        return int(call("cuMemRangeGetAttribute", 4, attribute, ptr, size))
    except TypeError:
        import ctypes

        from .._utils.cuda_utils import CUDAError, _driver_message

        out = ctypes.c_int(0)
        err = ctypes.CDLL("libcuda.so.1").cuMemRangeGetAttribute(
            ctypes.byref(out), ctypes.c_size_t(4), ctypes.c_int(int(attribute)), ctypes.c_uint64(int(ptr)),
            ctypes.c_size_t(int(size)))
        if err:
            raise CUDAError(_driver_message(err), op="cuMemRangeGetAttribute", code=err) from None
        return int(out.value)


def _read_preferred_location(buf: Any) -> Any:
    """The preferred location of `buf`'s range as a Device, a Host or None (CUDA 13's type/id attributes)."""
    from .._device import Device
    from .._host import Host

    attrs = driver.CUmem_range_attribute
    kind = range_int_attribute(attrs.CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, buf.handle, buf.size)
    ident = range_int_attribute(attrs.CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, buf.handle, buf.size)
    types = driver.CUmemLocationType
    if kind == int(types.CU_MEM_LOCATION_TYPE_DEVICE):
        return Device(ident)
    if kind == int(types.CU_MEM_LOCATION_TYPE_HOST):
        return Host()
    if kind == int(types.CU_MEM_LOCATION_TYPE_HOST_NUMA):
        return Host(numa_id=ident)
    return None


def _batch(buffers: Any, fn: str) -> list[Any]:
    from ._buffer import Buffer

    if isinstance(buffers, Buffer) or not isinstance(buffers, Sequence):
        raise TypeError(f"{fn} takes a sequence of Buffers, got {type(buffers).__name__}")
    bufs = list(buffers)
    for b in bufs:
        _check_managed(b)
    return bufs


def _batch_locations(bufs: list[Any], locations: Any) -> tuple[list[Any], list[int]]:
    """(CUmemLocations, index of the first buffer of each) for one location or one per buffer."""
    if isinstance(locations, Sequence) and not isinstance(locations, (str, bytes)):
        locs = list(locations)
        if len(locs) != len(bufs):
            raise ValueError(f"locations has length {len(locs)}, but there are {len(bufs)} buffers")
        return [_to_driver(_coerce_location(loc)) for loc in locs], list(range(len(locs)))  # type: ignore[arg-type]
    return [_to_driver(_coerce_location(locations))], [0]  # type: ignore[arg-type]


def _ranges(bufs: list[Any]) -> tuple[list[Any], list[int]]:
    return [driver.CUdeviceptr(b.handle) for b in bufs], [b.size for b in bufs]


def prefetch_batch(stream: Any, buffers: Sequence[Any], locations: Any) -> None:
    """Prefetch each managed Buffer to its location (one for all, or one per buffer) on `stream`."""
    s = _stream_of(stream)
    bufs = _batch(buffers, "prefetch_batch")
    locs, idxs = _batch_locations(bufs, locations)
    if bufs:
        ptrs, sizes = _ranges(bufs)
        call("cuMemPrefetchBatchAsync", ptrs, sizes, len(bufs), locs, idxs, len(locs), 0, s._h)


def discard_batch(stream: Any, buffers: Sequence[Any]) -> None:
    """Discard the resident pages of each managed Buffer on `stream` (their contents become undefined)."""
    s = _stream_of(stream)
    bufs = _batch(buffers, "discard_batch")
    if bufs:
        ptrs, sizes = _ranges(bufs)
        call("cuMemDiscardBatchAsync", ptrs, sizes, len(bufs), 0, s._h)


def discard_prefetch_batch(stream: Any, buffers: Sequence[Any], locations: Any) -> None:
    """Discard each managed Buffer's pages and prefetch it to its location on `stream`."""
    s = _stream_of(stream)
    bufs = _batch(buffers, "discard_prefetch_batch")
    locs, idxs = _batch_locations(bufs, locations)
    if bufs:
        ptrs, sizes = _ranges(bufs)
        call("cuMemDiscardAndPrefetchBatchAsync", ptrs, sizes, len(bufs), locs, idxs, len(locs), 0, s._h)
