"""The AWS Neuron backend: probe libnrt and list NeuronCores, without claiming them.

Probe steps: find libnrt, nrt_get_version, nrt_get_total_nc_count and
nrt_get_visible_nc_count (both documented as callable before nrt_init).  Each
visible NeuronCore is one device.  Opening a core means nrt_init, which takes
the cores for the whole process; it comes with NEFF loading in a later issue
and raises Unsupported here.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

from ironaccel.errors import NotAvailable, Unsupported
from ironaccel.probing import ProbedBackend, ProbeFacts, check_ordinal
from ironaccel.types import CapabilityFlags, ComputeTier, DeviceDescriptor, DeviceKind, Vendor

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


class Backend(ProbedBackend[list[DeviceDescriptor]]):
    """AWS Inferentia / Trainium NeuronCores through ctypes on libnrt."""

    name = BACKEND

    def _count(self, runtime: nrt.Runtime, fn_name: str) -> int:
        count = ctypes.c_uint32(0)
        code = getattr(runtime.lib, fn_name)(ctypes.byref(count))
        if code != 0:
            name = status_name(code)
            raise NotAvailable(BACKEND, f"{fn_name} returned {name} ({code}): libnrt {runtime.path} cannot reach "
                               "the Neuron driver", fix=FIX, code=code, code_name=name)
        return count.value

    def _probe(self, facts: ProbeFacts) -> list[DeviceDescriptor]:
        runtime = nrt.load()
        facts.record(library_path=runtime.path)
        version = nrt.Version()
        code = runtime.lib.nrt_get_version(ctypes.byref(version), ctypes.sizeof(version))
        if code != 0:
            name = status_name(code)
            raise NotAvailable(BACKEND, f"nrt_get_version returned {name} ({code})", fix=FIX, code=code,
                               code_name=name)
        facts.record(runtime_version=version.text)
        total = self._count(runtime, "nrt_get_total_nc_count")
        visible = self._count(runtime, "nrt_get_visible_nc_count") if runtime.has("nrt_get_visible_nc_count") else total
        itype = instance_type()
        generation = GENERATIONS.get(itype.split(".", 1)[0]) if itype else None
        facts.extra(total_cores=total, visible_cores=visible, instance_type=itype, generation=generation,
                    detail=version.rt_detail.decode(errors="replace"),
                    git_hash=version.git_hash.decode(errors="replace"))
        if visible == 0:
            where = "none is visible to this process (NEURON_RT_VISIBLE_CORES?)" if total else "there are none"
            raise NotAvailable(BACKEND, f"libnrt {version.text} loaded, but nrt_get_visible_nc_count found no "
                               f"NeuronCore: {where}", fix=FIX)
        flags = capabilities(generation)
        found = [
            DeviceDescriptor(BACKEND, i, f"{generation or 'NeuronCore'} {i}", Vendor.AWS, DeviceKind.NPU, 0,
                             ComputeTier.DATACENTER, flags, {"instance_type": itype, "generation": generation})
            for i in range(visible)
        ]
        facts.found(f"{visible} visible NeuronCore(s)", visible)
        return found

    def devices(self) -> list[DeviceDescriptor]:
        """One descriptor per visible NeuronCore; NotAvailable when none."""
        return list(self._state())

    def open(self, ordinal: int = 0) -> Any:
        """Check the ordinal, then raise Unsupported: opening a NeuronCore is not implemented yet."""
        check_ordinal(BACKEND, ordinal, len(self._state()))
        raise Unsupported(BACKEND, "open", "opening a NeuronCore (nrt_init, NEFF loading) is not implemented yet; "
                          "this backend probes and enumerates")
