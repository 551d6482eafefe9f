"""The AWS Neuron backend: probe libnrt and list NeuronCores, without claiming them.

Probe steps: find libnrt, nrt_get_version, nrt_get_total_nc_count and
nrt_get_visible_nc_count (both documented as callable before nrt_init).  Each
visible NeuronCore is one device.  Opening a core means nrt_init, which takes
the cores for the whole process; it comes with NEFF loading in a later issue
and raises Unsupported here.
"""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path
from typing import Any

from ironaccel.errors import InvalidArgument, NotAvailable, Unsupported
from ironaccel.probing import unavailable
from ironaccel.types import CapabilityFlags, ComputeTier, DeviceDescriptor, DeviceKind, ProbeResult, Vendor

from . import nrt
from .nrt import BACKEND, FIX, status_name

#: EC2 instance family -> NeuronCore generation.
GENERATIONS = {"inf1": "NeuronCore-v1", "inf2": "NeuronCore-v2", "trn1": "NeuronCore-v2", "trn1n": "NeuronCore-v2",
               "trn2": "NeuronCore-v3", "trn2u": "NeuronCore-v3"}
_DMI_PRODUCT = Path("/sys/devices/virtual/dmi/id/product_name")


def instance_type() -> str | None:
    """The EC2 instance type (``trn1.32xlarge``) from DMI, where the Nitro hypervisor publishes it."""
    try:
        value = _DMI_PRODUCT.read_text().strip()
    except OSError:
        return None
    return value if "." in value else None


def capabilities(generation: str | None) -> CapabilityFlags:
    flags = CapabilityFlags.FP16 | CapabilityFlags.INT8 | CapabilityFlags.MATRIX_UNITS
    if generation != "NeuronCore-v1":
        flags |= CapabilityFlags.BF16
    return flags


class Backend:
    """AWS Inferentia / Trainium NeuronCores through ctypes on libnrt."""

    name = BACKEND

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._facts: dict[str, Any] = {}
        self._devices: list[DeviceDescriptor] | None = None

    def probe(self) -> ProbeResult:
        with self._lock:
            try:
                found = self._check()
            except NotAvailable as exc:
                return unavailable(exc, **self._facts)
        return ProbeResult(BACKEND, True, reason=f"{len(found)} visible NeuronCore(s)", device_count=len(found),
                           **self._facts)

    def _count(self, runtime: nrt.Runtime, fn_name: str) -> int:
        count = ctypes.c_uint32(0)
        code = getattr(runtime.lib, fn_name)(ctypes.byref(count))
        if code != 0:
            name = status_name(code)
            raise NotAvailable(BACKEND, f"{fn_name} returned {name} ({code}): libnrt {runtime.path} cannot reach "
                               "the Neuron driver", fix=FIX, code=code, code_name=name)
        return count.value

    def _check(self) -> list[DeviceDescriptor]:
        if self._devices is not None:
            return self._devices
        self._facts = {}
        runtime = nrt.load()
        self._facts["library_path"] = runtime.path
        version = nrt.Version()
        code = runtime.lib.nrt_get_version(ctypes.byref(version), ctypes.sizeof(version))
        if code != 0:
            name = status_name(code)
            raise NotAvailable(BACKEND, f"nrt_get_version returned {name} ({code})", fix=FIX, code=code,
                               code_name=name)
        self._facts["runtime_version"] = version.text
        total = self._count(runtime, "nrt_get_total_nc_count")
        visible = self._count(runtime, "nrt_get_visible_nc_count") if runtime.has("nrt_get_visible_nc_count") else total
        itype = instance_type()
        generation = GENERATIONS.get(itype.split(".", 1)[0]) if itype else None
        self._facts["extras"] = {"total_cores": total, "visible_cores": visible, "instance_type": itype,
                                 "generation": generation, "detail": version.rt_detail.decode(errors="replace"),
                                 "git_hash": version.git_hash.decode(errors="replace")}
        if visible == 0:
            where = "none is visible to this process (NEURON_RT_VISIBLE_CORES?)" if total else "there are none"
            raise NotAvailable(BACKEND, f"libnrt {version.text} loaded, but nrt_get_visible_nc_count found no "
                               f"NeuronCore: {where}", fix=FIX)
        flags = capabilities(generation)
        self._devices = [
            DeviceDescriptor(BACKEND, i, f"{generation or 'NeuronCore'} {i}", Vendor.AWS, DeviceKind.NPU, 0,
                             ComputeTier.DATACENTER, flags, {"instance_type": itype, "generation": generation})
            for i in range(visible)
        ]
        return self._devices

    def devices(self) -> list[DeviceDescriptor]:
        """One descriptor per visible NeuronCore; NotAvailable when none."""
        with self._lock:
            return list(self._check())

    def open(self, ordinal: int = 0) -> Any:
        found = self.devices()
        if isinstance(ordinal, bool) or not isinstance(ordinal, int) or not 0 <= ordinal < len(found):
            raise InvalidArgument(BACKEND, "open", detail=f"ordinal {ordinal!r} out of range 0..{len(found) - 1}")
        raise Unsupported(BACKEND, "open", "opening a NeuronCore (nrt_init, NEFF loading) is not implemented yet; "
                          "this backend probes and enumerates")
