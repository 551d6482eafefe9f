"""The ironaccel Backend object for CUDA: probe, enumerate, open."""

from __future__ import annotations

from ironaccel import DeviceDescriptor, NotAvailable
from ironaccel.probing import ProbedBackend, ProbeFacts, check_ordinal, loaded_library

from .errors import BACKEND

__all__ = ["Backend"]


class Backend(ProbedBackend[int]):
    """CUDA through cuda.bindings.  Cheap to build; touches the driver only in its methods.

    Probe steps: the binding and libcuda (cuInit), cuDriverGetVersion, the device count,
    then NVRTC's version (informational: NVRTC is not needed to use a device).
    """

    name = BACKEND

    def _probe(self, facts: ProbeFacts) -> int:
        from ._driver import binding_version, call, driver
        from .device import device_count

        facts.record(binding_version=binding_version())
        driver()
        facts.record(library_path=loaded_library("libcuda.so"))
        version = int(call("cuDriverGetVersion"))
        driver_version = f"{version // 1000}.{version % 1000 // 10}"
        facts.record(driver_version=driver_version)
        count = device_count()
        if count == 0:
            raise NotAvailable(BACKEND, f"the NVIDIA driver {driver_version} reports no CUDA devices")
        try:
            from .program import nvrtc_version

            major, minor = nvrtc_version()
            facts.record(runtime_version=f"{major}.{minor}")
            facts.extra(nvrtc=f"{major}.{minor}")
        except NotAvailable as exc:
            facts.extra(nvrtc=f"unavailable: {exc.reason}")
        facts.found(f"{count} CUDA device(s), driver {driver_version}", count)
        return count

    def devices(self) -> list[DeviceDescriptor]:
        """Every CUDA device as a descriptor, ordinals 0..n-1; NotAvailable when the driver probe failed."""
        from .device import devices

        self._state()
        return devices()

    def open(self, ordinal: int = 0):
        """Open CUDA device `ordinal` as a `Device`; InvalidArgument for an ordinal out of range."""
        from .device import Device

        return Device(check_ordinal(BACKEND, ordinal, self._state()))
