"""The Level Zero backend: probe and enumerate through the loader.

Probe steps, each with its own reason: find libze_loader, zeInit(0) (the
loader with no driver answers ZE_RESULT_ERROR_UNINITIALIZED), zeDriverGet,
zeDeviceGet and the property queries.  `open` gives a LevelZeroDevice (a
ComputeDevice: context, command queue and lists, USM memory, SPIR-V modules).
"""

from __future__ import annotations

from typing import Any

from ironaccel.errors import DriverError, NotAvailable, Unsupported
from ironaccel.probing import ProbedBackend, ProbeFacts, check_ordinal
from ironaccel.types import CapabilityFlags, DeviceDescriptor

from . import api, structs
from . import devices as devices_module
from . import loader as loader_module
from .device import LevelZeroDevice
from .loader import BACKEND, FIX_DRIVER
from .results import result_name


class Backend(ProbedBackend[list[DeviceDescriptor]]):
    """Intel oneAPI Level Zero (GPUs and NPUs) through ctypes on libze_loader."""

    name = BACKEND

    def _probe(self, facts: ProbeFacts) -> list[DeviceDescriptor]:
        loader = loader_module.load()
        facts.record(library_path=loader.path)
        code = loader.lib.zeInit(0)
        facts.record(runtime_version=loader.version())
        if code != 0:
            raise self._no_driver("zeInit(0)", code, loader.path)
        try:
            driver_handles = devices_module.drivers(loader)
            if not driver_handles:
                reason = f"zeDriverGet found no Level Zero driver (loader {loader.path})"
                raise NotAvailable(BACKEND, reason, fix=FIX_DRIVER)
            infos = devices_module.query(loader)
        except DriverError as exc:
            raise self._no_driver(exc.op or "?", exc.code or 0, loader.path) from exc
        if not infos:
            raise NotAvailable(BACKEND, f"{len(driver_handles)} Level Zero driver(s) but zeDeviceGet found no device",
                               fix=FIX_DRIVER)
        facts.record(driver_version=str(infos[0].driver_version))
        facts.extra(drivers=len(driver_handles), api_version=devices_module.structs.version_text(infos[0].api_version))
        found = [devices_module.describe(i, info) for i, info in enumerate(infos)]
        facts.found(f"{len(found)} device(s): " + ", ".join(d.name for d in found), len(found))
        return found

    @staticmethod
    def _no_driver(op: str, code: int, path: str) -> NotAvailable:
        name = result_name(code)
        return NotAvailable(
            BACKEND,
            f"{op} returned {name} (0x{code:08X}): the Level Zero loader {path} is installed but found no driver",
            fix=FIX_DRIVER,
            code=code,
            code_name=name,
        )

    def devices(self) -> list[DeviceDescriptor]:
        """Every device of every driver, in driver order; NotAvailable if none."""
        return list(self._state())

    def open(self, ordinal: int = 0) -> Any:
        """A LevelZeroDevice (ComputeDevice) on device `ordinal`, counted across drivers in driver order."""
        found = self._state()
        check_ordinal(BACKEND, ordinal, len(found))
        loader = loader_module.load()
        lib = api.declare(loader)
        handles = [(driver, device) for driver in devices_module.drivers(loader)
                   for device in devices_module.devices_of(loader, driver)]
        infos = devices_module.query(loader)
        driver, device = handles[ordinal]
        info = infos[ordinal]
        compute = [i for i, g in enumerate(info.queue_groups) if g.flags & structs.QUEUE_GROUP_COMPUTE]
        if not compute:
            raise Unsupported(BACKEND, "open", f"{found[ordinal].name} has no compute command-queue group")
        c = info.compute
        return LevelZeroDevice(lib, driver, device, found[ordinal], max_alloc=int(info.props.maxMemAllocSize),
                               group_limits=(c.maxGroupCountX, c.maxGroupCountY, c.maxGroupCountZ),
                               compute_ordinal=compute[0], queue_count=int(info.queue_groups[compute[0]].numQueues),
                               timestamps=CapabilityFlags.TIMESTAMPS in found[ordinal].capabilities,
                               timer_ns=float(info.props.timerResolution or 1))
