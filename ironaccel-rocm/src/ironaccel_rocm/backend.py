"""The ROCm/HIP backend: probe, enumerate, open, on hip-python.

The probe asks, in order: is hip-python importable, can it load libamdhip64
(hipRuntimeGetVersion), is there a driver and a device (hipGetDeviceCount).
Each failure is a NotAvailable saying which step failed, with HIP's own error
name, e.g. ``hipErrorNoDevice`` (100) on a machine with the runtime but no GPU.
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

from ironaccel.errors import DriverError, InvalidArgument, NotAvailable
from ironaccel.probing import distribution_version, unavailable
from ironaccel.types import DeviceDescriptor, ProbeResult

from . import binding
from .binding import BACKEND, FIX_RUNTIME, call, format_version, name_of
from .device import HipDevice
from .properties import describe


class Backend:
    """ROCm/HIP through hip-python."""

    name = BACKEND

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hip: ModuleType | None = None
        self._facts: dict[str, Any] = {}
        self._devices: list[DeviceDescriptor] | None = None

    # -- probe ---------------------------------------------------------------

    def probe(self) -> ProbeResult:
        """Never raises for an unusable backend: the result says why."""
        try:
            count = self._check()
        except NotAvailable as exc:
            return unavailable(exc, **self._facts)
        return ProbeResult(
            BACKEND,
            True,
            reason=f"{count} HIP device(s), HIP runtime {self._facts.get('runtime_version')}",
            device_count=count,
            **self._facts,
        )

    def _check(self) -> int:
        """Run the probe steps; the device count, or NotAvailable naming the failed step."""
        self._facts = {"binding_version": distribution_version("hip-python")}
        hip = binding.load()
        runtime = call(hip.hipRuntimeGetVersion, "hipRuntimeGetVersion")
        self._facts["runtime_version"] = format_version(int(runtime))
        self._facts["library_path"] = binding.loaded_library()
        try:
            driver = call(hip.hipDriverGetVersion, "hipDriverGetVersion")
            self._facts["driver_version"] = format_version(int(driver))
        except DriverError:
            pass  # no driver: hipGetDeviceCount below says so with its own code
        result = hip.hipGetDeviceCount()
        err, count = result[0], int(result[1])
        code = binding.code_of(err)
        if code != binding.HIP_SUCCESS:
            name = name_of(err)
            raise NotAvailable(
                BACKEND,
                f"hipGetDeviceCount returned {name} ({code}): the HIP runtime "
                f"{self._facts['runtime_version']} loaded but found no usable AMD GPU",
                fix=FIX_RUNTIME,
                code=code,
                code_name=name,
            )
        if count == 0:
            raise NotAvailable(BACKEND, "hipGetDeviceCount found 0 devices", fix=FIX_RUNTIME)
        self._hip = hip
        return count

    def _usable(self) -> ModuleType:
        with self._lock:
            if self._hip is None:
                self._check()
            assert self._hip is not None
            return self._hip

    # -- enumerate and open --------------------------------------------------

    def devices(self) -> list[DeviceDescriptor]:
        """One DeviceDescriptor per HIP device (hipGetDeviceProperties); NotAvailable if none."""
        hip = self._usable()
        with self._lock:
            if self._devices is None:
                self._devices = _enumerate(hip)
            return list(self._devices)

    def open(self, ordinal: int = 0) -> HipDevice:
        """Select device `ordinal`; InvalidArgument if out of range."""
        devices = self.devices()
        if isinstance(ordinal, bool) or not isinstance(ordinal, int) or not 0 <= ordinal < len(devices):
            raise InvalidArgument(BACKEND, "open", detail=f"ordinal {ordinal!r} out of range 0..{len(devices) - 1}")
        return HipDevice(self._usable(), devices[ordinal])


def _enumerate(hip: ModuleType) -> list[DeviceDescriptor]:
    count = int(call(hip.hipGetDeviceCount, "hipGetDeviceCount"))
    out = []
    for ordinal in range(count):
        props = call(hip.hipGetDeviceProperties, "hipGetDeviceProperties", ordinal)
        peer = any(
            call(hip.hipDeviceCanAccessPeer, "hipDeviceCanAccessPeer", ordinal, other)
            for other in range(count)
            if other != ordinal
        )
        out.append(describe(ordinal, props, peer_access=bool(peer)))
    return out
