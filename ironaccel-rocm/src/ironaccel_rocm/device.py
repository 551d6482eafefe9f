"""An opened HIP device: its descriptor, synchronize, close.

Deliberately small: streams, memory and launch on HIP come with a later issue,
once they can run on an AMD GPU.  What is here is what `open()` needs to be
honest: the device is selected (hipSetDevice) and checked by a
hipDeviceSynchronize, and use after close raises ClosedError.
"""

from __future__ import annotations

import threading
from types import ModuleType

from ironaccel.errors import ClosedError, InvalidArgument
from ironaccel.types import DeviceDescriptor

from .binding import BACKEND, call


class HipDevice:
    """Device `descriptor.ordinal` of the HIP runtime."""

    def __init__(self, hip: ModuleType, descriptor: DeviceDescriptor):
        if not isinstance(hip, ModuleType) or not isinstance(descriptor, DeviceDescriptor):
            raise InvalidArgument(BACKEND, "hipSetDevice", detail=(
                "HipDevice takes hip-python's hip module and a DeviceDescriptor (get one from "
                f"Backend().open(ordinal)), got {type(hip).__name__} and {type(descriptor).__name__}"))
        if descriptor.backend != BACKEND:
            raise InvalidArgument(BACKEND, "hipSetDevice", detail=(
                f"the descriptor is of backend {descriptor.backend!r}, not {BACKEND!r}"))
        self.descriptor = descriptor
        self._hip = hip
        self._closed = False
        self._lock = threading.Lock()
        self._select("hipSetDevice")

    @property
    def ordinal(self) -> int:
        return self.descriptor.ordinal

    @property
    def closed(self) -> bool:
        return self._closed

    def _select(self, op: str) -> None:
        if self._closed:
            raise ClosedError(BACKEND, op, "device")
        call(self._hip.hipSetDevice, "hipSetDevice", self.ordinal)

    def synchronize(self) -> None:
        """Wait for all work on this device (hipDeviceSynchronize)."""
        with self._lock:
            self._select("hipDeviceSynchronize")
            call(self._hip.hipDeviceSynchronize, "hipDeviceSynchronize")

    def close(self) -> None:
        """Forget the device; closing twice is a no-op.  The primary context stays with the runtime."""
        self._closed = True

    def __enter__(self) -> HipDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<HipDevice {self.ordinal} {self.descriptor.name!r} {state}>"
