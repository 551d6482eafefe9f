"""Adapter enumeration: every adapter wgpu-native sees, as DeviceDescriptors in a stable order.

WebGPU reports no memory size, so `memory_bytes` is 0 and the limits that bound
compute (buffer size, storage binding size, workgroup counts) are in `extras`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ironaccel.compute import ensure_runtime_dir
from ironaccel.types import CapabilityFlags, ComputeTier, DeviceDescriptor, DeviceKind, Vendor

BACKEND = "webgpu"

#: Best first: native APIs before GL, discrete before integrated before software.
_BACKEND_RANK = {"Vulkan": 0, "Metal": 0, "D3D12": 1, "OpenGL": 3, "OpenGLES": 3}
_TYPE_RANK = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2, "Unknown": 3, "CPU": 4}
_KIND = {"CPU": DeviceKind.CPU}

#: Adapter features that map to capability flags.
_FEATURE_FLAGS = {
    "shader-f16": CapabilityFlags.FP16,
    "shader-f64": CapabilityFlags.FP64,
    "subgroup": CapabilityFlags.SUBGROUPS,
    "timestamp-query": CapabilityFlags.TIMESTAMPS,
}

#: Optional features a device asks for when the adapter has them (usable from WGSL with `enable`).
WANTED_FEATURES = ("shader-f16", "shader-f64", "shader-int64", "subgroup", "timestamp-query")

#: Limits a device asks for at the adapter's maximum, so big buffers and grids work.
WANTED_LIMITS = (
    "max-buffer-size",
    "max-storage-buffer-binding-size",
    "max-storage-buffers-per-shader-stage",
    "max-uniform-buffer-binding-size",
    "max-bind-groups",
    "max-bindings-per-bind-group",
    "max-compute-workgroups-per-dimension",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-size-x",
    "max-compute-workgroup-size-y",
    "max-compute-workgroup-size-z",
    "max-compute-workgroup-storage-size",
)

_DATACENTER = re.compile(r"\b(A100|A800|H100|H200|H800|GH200|B100|B200|GB200|L40S?|A40|A30|V100|MI\d{3}\w*|Instinct|"
                         r"Data Center GPU|Gaudi)\b", re.I)
_WORKSTATION = re.compile(r"\b(Quadro|RTX A\d{4}|RTX \d{4} Ada|Radeon Pro|Arc Pro)\b", re.I)
_VENDOR_WORDS = (("nvidia", Vendor.NVIDIA), ("llvmpipe", Vendor.MESA), ("lavapipe", Vendor.MESA),
                 ("softpipe", Vendor.MESA), ("amd", Vendor.AMD), ("radeon", Vendor.AMD), ("intel", Vendor.INTEL),
                 ("apple", Vendor.APPLE), ("adreno", Vendor.QUALCOMM), ("mali", Vendor.ARM))


@dataclass(frozen=True)
class AdapterEntry:
    """An adapter wgpu-native returned, with the descriptor built from it."""

    adapter: Any
    descriptor: DeviceDescriptor


def vendor_of(vendor_id: int, *names: str) -> Vendor:
    """The vendor from the PCI id when given, else from the driver's words (GL adapters report id 0)."""
    vendor = Vendor.from_pci_id(vendor_id) if vendor_id else Vendor.UNKNOWN
    if vendor is Vendor.UNKNOWN:
        text = " ".join(names).lower()
        for word, found in _VENDOR_WORDS:
            if word in text:
                return found
    return vendor


def compute_tier(name: str, kind: DeviceKind) -> ComputeTier:
    """A coarse tier from the adapter type and the product name."""
    if kind is DeviceKind.CPU:
        return ComputeTier.SOFTWARE
    if _DATACENTER.search(name):
        return ComputeTier.DATACENTER
    if _WORKSTATION.search(name):
        return ComputeTier.WORKSTATION
    return ComputeTier.CONSUMER


def _sort_key(adapter: Any) -> tuple[Any, ...]:
    info = adapter.info
    return (
        _BACKEND_RANK.get(info.get("backend_type", ""), 2),
        _TYPE_RANK.get(info.get("adapter_type", ""), 3),
        str(info.get("device", "")),
        int(info.get("vendor_id", 0) or 0),
        int(info.get("device_id", 0) or 0),
        str(info.get("description", "")),
    )


def describe(adapter: Any, ordinal: int) -> DeviceDescriptor:
    """The DeviceDescriptor of one wgpu adapter."""
    info = adapter.info
    device = str(info.get("device") or info.get("description") or "unknown adapter")
    backend_type = str(info.get("backend_type", "Unknown"))
    adapter_type = str(info.get("adapter_type", "Unknown"))
    vendor_id = int(info.get("vendor_id", 0) or 0)
    kind = _KIND.get(adapter_type, DeviceKind.GPU)
    features = sorted(str(f) for f in adapter.features)
    caps = CapabilityFlags.RUNTIME_COMPILE
    for feature, flag in _FEATURE_FLAGS.items():
        if feature in features:
            caps |= flag
    limits = {str(k): int(v) for k, v in adapter.limits.items()}
    return DeviceDescriptor(
        backend=BACKEND,
        ordinal=ordinal,
        name=f"{device} via {backend_type}",
        vendor=vendor_of(vendor_id, str(info.get("vendor", "")), device, str(info.get("description", ""))),
        kind=kind,
        memory_bytes=0,
        compute_tier=compute_tier(device, kind),
        capabilities=caps,
        extras={
            "device": device,
            "backend_type": backend_type,
            "adapter_type": adapter_type,
            "vendor_id": vendor_id,
            "device_id": int(info.get("device_id", 0) or 0),
            "driver": str(info.get("description", "")),
            "architecture": str(info.get("architecture", "")),
            "max_buffer_size": limits.get("max-buffer-size", 0),
            "max_storage_buffer_binding_size": limits.get("max-storage-buffer-binding-size", 0),
            "max_compute_workgroups_per_dimension": limits.get("max-compute-workgroups-per-dimension", 0),
            "max_compute_invocations_per_workgroup": limits.get("max-compute-invocations-per-workgroup", 0),
            "limits": limits,
            "features": features,
        },
    )


def enumerate_adapters(wgpu: Any) -> list[AdapterEntry]:
    """Every adapter wgpu-native sees, best first, in an order that is stable from run to run.

    wgpu-native's EGL probe loads libwayland-client, which prints "XDG_RUNTIME_DIR is invalid or not set"
    for every instance where that variable is missing: `ensure_runtime_dir` gives the process a private one.
    """
    ensure_runtime_dir()
    adapters = sorted(wgpu.gpu.enumerate_adapters_sync(), key=_sort_key)
    return [AdapterEntry(adapter, describe(adapter, ordinal)) for ordinal, adapter in enumerate(adapters)]
