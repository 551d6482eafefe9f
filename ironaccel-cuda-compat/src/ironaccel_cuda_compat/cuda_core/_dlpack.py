"""cuda.core's DLPack device types and the checks its `__dlpack__` methods make (the export itself is ironaccel's
`_dlpack`)."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

__all__ = ["DLDeviceType", "classify_dl_device"]


class DLDeviceType(IntEnum):
    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLCUDAManaged = 13


def classify_dl_device(buf: Any) -> tuple[int, int]:
    """The DLPack (device type, id) of anything with cuda.core's accessibility properties, as plain ints."""
    d, h = buf.is_device_accessible, buf.is_host_accessible
    if d and not h:
        return (DLDeviceType.kDLCUDA.value, buf.device_id)
    if d and h:
        return ((DLDeviceType.kDLCUDAManaged if buf.is_managed else DLDeviceType.kDLCUDAHost).value, 0)
    if h:
        return (DLDeviceType.kDLCPU.value, 0)
    raise BufferError("buffer is neither device-accessible nor host-accessible")


def export_versioned(max_version: Any, dl_device: Any, copy: Any) -> bool:
    """Whether `__dlpack__(max_version=, dl_device=, copy=)` exports a versioned capsule (BufferError for what
    cuda.core refuses)."""
    if dl_device is not None:
        raise BufferError("Sorry, not supported: dl_device other than None")
    if copy is True:
        raise BufferError("Sorry, not supported: copy=True")
    if max_version is None:
        return False
    if not isinstance(max_version, tuple) or len(max_version) != 2:
        raise BufferError(f"Expected max_version tuple[int, int], got {max_version}")
    return max_version >= (1, 0)
