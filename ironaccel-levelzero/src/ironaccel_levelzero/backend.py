"""The Level Zero backend: probe and enumerate through the loader.

Probe steps, each with its own reason: find libze_loader, zeInit(0) (the
loader with no driver answers ZE_RESULT_ERROR_UNINITIALIZED), zeDriverGet,
zeDeviceGet and the property queries.  Opening a device (context, command
lists, memory, SPIR-V modules) comes in a later issue and raises Unsupported.
"""

from __future__ import annotations

import threading
from typing import Any

from ironaccel.errors import DriverError, InvalidArgument, NotAvailable, Unsupported
from ironaccel.probing import unavailable
from ironaccel.types import DeviceDescriptor, ProbeResult

from . import devices as devices_module
from . import loader as loader_module
from .loader import BACKEND, FIX_DRIVER
from .results import result_name


class Backend:
    """Intel oneAPI Level Zero (GPUs and NPUs) through ctypes on libze_loader."""

    name = BACKEND

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._facts: dict[str, Any] = {}
        self._devices: list[DeviceDescriptor] | None = None

    def probe(self) -> ProbeResult:
        """Never raises for an unusable backend: the result says why."""
        with self._lock:
            try:
                found = self._check()
            except NotAvailable as exc:
                return unavailable(exc, **self._facts)
        return ProbeResult(
            BACKEND,
            True,
            reason=f"{len(found)} device(s): " + ", ".join(d.name for d in found),
            device_count=len(found),
            **self._facts,
        )

    def _check(self) -> list[DeviceDescriptor]:
        if self._devices is not None:
            return self._devices
        self._facts = {}
        loader = loader_module.load()
        self._facts["library_path"] = loader.path
        code = loader.lib.zeInit(0)
        self._facts["runtime_version"] = loader.version()
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
        self._facts["driver_version"] = str(infos[0].driver_version)
        self._facts["extras"] = {"drivers": len(driver_handles),
                                 "api_version": devices_module.structs.version_text(infos[0].api_version)}
        self._devices = [devices_module.describe(i, info) for i, info in enumerate(infos)]
        return self._devices

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
        with self._lock:
            return list(self._check())

    def open(self, ordinal: int = 0) -> Any:
        """Not yet: InvalidArgument for a bad ordinal, else Unsupported."""
        found = self.devices()
        if isinstance(ordinal, bool) or not isinstance(ordinal, int) or not 0 <= ordinal < len(found):
            raise InvalidArgument(BACKEND, "open", detail=f"ordinal {ordinal!r} out of range 0..{len(found) - 1}")
        raise Unsupported(BACKEND, "open", "opening a Level Zero device (context, command lists, memory) "
                          "is not implemented yet; this backend probes and enumerates")
