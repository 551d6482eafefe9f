"""The Metal backend: probe and enumerate MTLDevices through pyobjc-framework-Metal.

Probe steps: macOS only (``runs only on darwin; this is linux`` elsewhere),
the ``Metal`` binding, then MTLCopyAllDevices (falling back to
MTLCreateSystemDefaultDevice).  Translation uses only documented MTLDevice
properties; anything a device does not answer is left out, not guessed.
Opening a device (command queues, buffers, MSL pipelines) comes in a later
issue and raises Unsupported.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ironaccel.errors import NotAvailable, Unsupported
from ironaccel.probing import (
    ProbedBackend,
    ProbeFacts,
    check_ordinal,
    distribution_version,
    import_binding,
    require_platform,
)
from ironaccel.types import CapabilityFlags, ComputeTier, DeviceDescriptor, DeviceKind, Vendor

BACKEND = "metal"
DISTRIBUTION = "pyobjc-framework-Metal"
FIX_BINDING = "pip install 'ironaccel-metal[metal]' (installs pyobjc-framework-Metal on macOS)"


def _ask(device: Any, selector: str, *args: Any) -> Any:
    """Call an Objective-C getter if the device (or this macOS) has it, else None."""
    method = getattr(device, selector, None)
    if method is None:
        return None
    try:
        return method(*args)
    except Exception:  # an unrecognized selector on an older macOS
        return None


def _vendor(name: str, unified: bool) -> Vendor:
    lowered = name.lower()
    if lowered.startswith("apple") or (unified and "intel" not in lowered):
        return Vendor.APPLE
    if "amd" in lowered or "radeon" in lowered:
        return Vendor.AMD
    if "intel" in lowered:
        return Vendor.INTEL
    if "nvidia" in lowered or "geforce" in lowered:
        return Vendor.NVIDIA
    return Vendor.UNKNOWN


def describe(metal: ModuleType, ordinal: int, device: Any) -> DeviceDescriptor:
    """DeviceDescriptor of one MTLDevice."""
    name = str(_ask(device, "name") or f"Metal device {ordinal}")
    unified = bool(_ask(device, "hasUnifiedMemory"))
    apple7 = getattr(metal, "MTLGPUFamilyApple7", None)
    mac2 = getattr(metal, "MTLGPUFamilyMac2", None)
    family_apple7 = apple7 is not None and bool(_ask(device, "supportsFamily_", apple7))
    family_mac2 = mac2 is not None and bool(_ask(device, "supportsFamily_", mac2))
    flags = CapabilityFlags.FP16 | CapabilityFlags.INT8 | CapabilityFlags.HOST_MAPPED_MEMORY
    flags |= CapabilityFlags.RUNTIME_COMPILE  # newLibraryWithSource compiles MSL at run time
    if unified:
        flags |= CapabilityFlags.UNIFIED_ADDRESSING
    if family_apple7 or family_mac2:
        flags |= CapabilityFlags.SUBGROUPS  # SIMD-group functions
    if family_apple7:
        flags |= CapabilityFlags.MATRIX_UNITS  # simdgroup_matrix
    extras = {
        "registry_id": _ask(device, "registryID"),
        "has_unified_memory": unified,
        "low_power": bool(_ask(device, "isLowPower")),
        "headless": bool(_ask(device, "isHeadless")),
        "removable": bool(_ask(device, "isRemovable")),
        "max_buffer_length": _ask(device, "maxBufferLength"),
        "gpu_family_apple7": family_apple7,
        "gpu_family_mac2": family_mac2,
    }
    return DeviceDescriptor(
        backend=BACKEND,
        ordinal=ordinal,
        name=name,
        vendor=_vendor(name, unified),
        kind=DeviceKind.GPU,
        memory_bytes=int(_ask(device, "recommendedMaxWorkingSetSize") or 0),
        compute_tier=ComputeTier.CONSUMER,
        capabilities=flags,
        extras={k: v for k, v in extras.items() if v is not None},
    )


class Backend(ProbedBackend[list[DeviceDescriptor]]):
    """Apple Metal through pyobjc."""

    name = BACKEND

    def _probe(self, facts: ProbeFacts) -> list[DeviceDescriptor]:
        require_platform(BACKEND, "darwin", fix="Metal exists only on Apple platforms; use vulkan or webgpu here")
        metal = import_binding(BACKEND, "Metal", DISTRIBUTION, fix=FIX_BINDING)
        facts.record(binding_version=distribution_version(DISTRIBUTION))
        copy_all = getattr(metal, "MTLCopyAllDevices", None)
        create_default = getattr(metal, "MTLCreateSystemDefaultDevice", None)
        if not callable(copy_all) and not callable(create_default):
            raise NotAvailable(BACKEND, f"the binding Metal ({DISTRIBUTION} "
                               f"{distribution_version(DISTRIBUTION) or 'of unknown version'}) has neither "
                               "MTLCopyAllDevices nor MTLCreateSystemDefaultDevice", fix=FIX_BINDING)
        devices = list(copy_all() or []) if callable(copy_all) else []
        if not devices and callable(create_default):
            default = create_default()
            devices = [default] if default is not None else []
        if not devices:
            raise NotAvailable(BACKEND, "MTLCopyAllDevices and MTLCreateSystemDefaultDevice returned no device "
                               "(a virtual machine without a GPU?)")
        found = [describe(metal, i, d) for i, d in enumerate(devices)]
        facts.found(", ".join(d.name for d in found), len(found))
        return found

    def devices(self) -> list[DeviceDescriptor]:
        """The Metal devices the probe found (none off macOS)."""
        return list(self._state())

    def open(self, ordinal: int = 0) -> Any:
        """Check the ordinal, then raise Unsupported: opening a Metal device is not implemented yet."""
        check_ordinal(BACKEND, ordinal, len(self._state()))
        raise Unsupported(BACKEND, "open", "opening a Metal device (command queues, buffers, MSL pipelines) is "
                          "not implemented yet; this backend probes and enumerates")
