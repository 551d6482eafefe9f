"""The ironaccel Backend object for CUDA: probe, enumerate, open."""

from __future__ import annotations

from ironaccel import DeviceDescriptor, NotAvailable, ProbeResult
from ironaccel.probing import probe_guard

from .errors import BACKEND

__all__ = ["Backend"]


def _loaded_library(fragment: str) -> str | None:
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1]
                if fragment in path.rsplit("/", 1)[-1]:
                    return path
    except OSError:
        pass
    return None


class Backend:
    """CUDA through cuda.bindings.  Cheap to build; touches the driver only in its methods."""

    name = BACKEND

    @probe_guard
    def probe(self) -> ProbeResult:
        from ._driver import binding_version, call, driver
        from .device import device_count

        driver()
        version = int(call("cuDriverGetVersion"))
        driver_version = f"{version // 1000}.{version % 1000 // 10}"
        count = device_count()
        if count == 0:
            raise NotAvailable(BACKEND, "the NVIDIA driver reports no CUDA devices")
        nvrtc = None
        nvrtc_reason = ""
        try:
            from .program import nvrtc_version

            major, minor = nvrtc_version()
            nvrtc = f"{major}.{minor}"
        except NotAvailable as exc:
            nvrtc_reason = exc.reason
        return ProbeResult(
            backend=BACKEND,
            available=True,
            reason=f"{count} CUDA device(s), driver {driver_version}",
            driver_version=driver_version,
            runtime_version=nvrtc,
            binding_version=binding_version(),
            library_path=_loaded_library("libcuda.so"),
            device_count=count,
            extras={"nvrtc": nvrtc or f"unavailable: {nvrtc_reason}"},
        )

    def devices(self) -> list[DeviceDescriptor]:
        from .device import devices

        return devices()

    def open(self, ordinal: int = 0):
        from .device import Device

        return Device(ordinal)
