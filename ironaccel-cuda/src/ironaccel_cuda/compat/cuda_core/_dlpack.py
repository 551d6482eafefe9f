"""cuda.core's DLPack device types (the export itself is ironaccel's `_dlpack`)."""

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
    """The DLPack (device type, id) of anything with cuda.core's accessibility properties."""
    d, h = buf.is_device_accessible, buf.is_host_accessible
    if d and not h:
        return (DLDeviceType.kDLCUDA, buf.device_id)
    if d and h:
        return (DLDeviceType.kDLCUDAManaged if buf.is_managed else DLDeviceType.kDLCUDAHost, 0)
    if h:
        return (DLDeviceType.kDLCPU, 0)
    raise BufferError("buffer is neither device-accessible nor host-accessible")
