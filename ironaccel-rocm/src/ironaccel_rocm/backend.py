"""The ROCm/HIP backend: probe, enumerate, open, on hip-python.

The probe asks, in order: is hip-python importable, can it load libamdhip64
(hipRuntimeGetVersion), is there a driver and a device (hipGetDeviceCount),
and what each device is (hipGetDeviceProperties).  Each failure is a
NotAvailable saying which step failed, with HIP's own error name, e.g.
``hipErrorNoDevice`` (100) on a machine with the runtime but no GPU.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from ironaccel.errors import DriverError, NotAvailable
from ironaccel.probing import ProbedBackend, ProbeFacts, check_ordinal, distribution_version, loaded_library
from ironaccel.types import DeviceDescriptor

from . import binding
from .binding import BACKEND, call, format_version, name_of
from .device import HipDevice
from .properties import describe

if TYPE_CHECKING:
    from .compute import HipComputeDevice


class Backend(ProbedBackend[tuple[ModuleType, list[DeviceDescriptor]]]):
    """ROCm/HIP through hip-python."""

    name = BACKEND

    def _probe(self, facts: ProbeFacts) -> tuple[ModuleType, list[DeviceDescriptor]]:
        facts.record(binding_version=distribution_version("hip-python"))
        hip = binding.load()
        fn = binding.function
        try:
            runtime = format_version(int(call(fn(hip, "hipRuntimeGetVersion"), "hipRuntimeGetVersion")))
        except DriverError as exc:
            raise NotAvailable(BACKEND, f"hipRuntimeGetVersion failed: {exc.message}", fix=binding.FIX_RUNTIME,
                               code=exc.code, code_name=exc.code_name) from exc
        facts.record(runtime_version=runtime, library_path=loaded_library("libamdhip64"))
        try:
            facts.record(driver_version=format_version(int(call(fn(hip, "hipDriverGetVersion"),
                                                                 "hipDriverGetVersion"))))
        except DriverError:
            pass  # no driver: hipGetDeviceCount below says so with its own code
        err, count = fn(hip, "hipGetDeviceCount")()[:2]
        code = binding.code_of(err)
        if code != binding.HIP_SUCCESS:
            name = name_of(err)
            raise NotAvailable(BACKEND, f"hipGetDeviceCount returned {name} ({code}): the HIP runtime {runtime} "
                               "loaded but found no usable AMD GPU", fix=binding.fix_no_device(), code=code,
                               code_name=name)
        if int(count) == 0:
            raise NotAvailable(BACKEND, f"the HIP runtime {runtime} loaded but hipGetDeviceCount found 0 devices",
                               fix=binding.fix_no_device())
        try:
            devices = _enumerate(hip)
        except DriverError as exc:
            raise NotAvailable(BACKEND, f"{exc.op} failed while listing devices: {exc.message}", code=exc.code,
                               code_name=exc.code_name) from exc
        facts.found(f"{len(devices)} HIP device(s), HIP runtime {runtime}", len(devices))
        return hip, devices

    def devices(self) -> list[DeviceDescriptor]:
        """One DeviceDescriptor per HIP device (hipGetDeviceProperties); NotAvailable if none."""
        return list(self._state()[1])

    def open(self, ordinal: int = 0) -> HipDevice:
        """Select device `ordinal`; InvalidArgument if out of range."""
        hip, devices = self._state()
        return HipDevice(hip, devices[check_ordinal(BACKEND, ordinal, len(devices))])

    def compute(self, ordinal: int = 0) -> HipComputeDevice:
        """The cross-vendor ComputeDevice on device `ordinal` (the compute kit over a HipDevice it owns)."""
        from .compute import HipComputeDevice

        return HipComputeDevice(self.open(ordinal))


def _enumerate(hip: ModuleType) -> list[DeviceDescriptor]:
    fn = binding.function
    count = int(call(fn(hip, "hipGetDeviceCount"), "hipGetDeviceCount"))
    out = []
    for ordinal in range(count):
        props = call(fn(hip, "hipGetDeviceProperties"), "hipGetDeviceProperties", ordinal)
        peer = any(
            call(fn(hip, "hipDeviceCanAccessPeer"), "hipDeviceCanAccessPeer", ordinal, other)
            for other in range(count)
            if other != ordinal
        )
        out.append(describe(ordinal, props, peer_access=bool(peer)))
    return out
