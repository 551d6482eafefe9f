"""What a VkPhysicalDevice is and can do, read once, mapped to the core DeviceDescriptor.

Properties, limits, features, memory and queue families are read through the
Vulkan 1.1+ `*2` queries with the 1.1/1.2/1.3 structs chained in, as far as
the device's API version allows.  `PhysicalDeviceInfo` keeps the raw facts;
`descriptor()` translates them into ironaccel's vocabulary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ironaccel.types import CapabilityFlags, ComputeTier, DeviceDescriptor, DeviceKind, Vendor

from .binding import BACKEND, Binding
from .instance import API_1_1, API_1_2, API_1_3, version_string

__all__ = ["PhysicalDeviceInfo", "read_info", "ENABLED_FEATURES", "MemoryType", "QueueFamily"]

DEVICE_TYPES = {0: "other", 1: "integrated_gpu", 2: "discrete_gpu", 3: "virtual_gpu", 4: "cpu"}
TYPE_INTEGRATED, TYPE_DISCRETE, TYPE_CPU = 1, 2, 4

MEMORY_DEVICE_LOCAL = 0x1
MEMORY_HOST_VISIBLE = 0x2
MEMORY_HOST_COHERENT = 0x4
MEMORY_HOST_CACHED = 0x8
HEAP_DEVICE_LOCAL = 0x1

QUEUE_GRAPHICS, QUEUE_COMPUTE, QUEUE_TRANSFER = 0x1, 0x2, 0x4
STAGE_COMPUTE = 0x20
SUBGROUP_BASIC = 0x1
SUBGROUP_OPS = {
    0x1: "basic", 0x2: "vote", 0x4: "arithmetic", 0x8: "ballot",
    0x10: "shuffle", 0x20: "shuffle_relative", 0x40: "clustered", 0x80: "quad",
}

# Features a compute user may need, enabled at device creation wherever supported.  Left out on
# purpose: robustBufferAccess (slows every access), and anything graphics-only.
ENABLED_FEATURES: dict[str, tuple[str, ...]] = {
    "core": ("shaderFloat64", "shaderInt64", "shaderInt16"),
    "1.1": ("storageBuffer16BitAccess", "uniformAndStorageBuffer16BitAccess", "storagePushConstant16",
            "variablePointersStorageBuffer", "variablePointers"),
    "1.2": ("storageBuffer8BitAccess", "uniformAndStorageBuffer8BitAccess", "storagePushConstant8",
            "shaderBufferInt64Atomics", "shaderSharedInt64Atomics", "shaderFloat16", "shaderInt8",
            "scalarBlockLayout", "timelineSemaphore", "vulkanMemoryModel", "vulkanMemoryModelDeviceScope",
            "shaderSubgroupExtendedTypes", "subgroupBroadcastDynamicId", "uniformBufferStandardLayout"),
    "1.3": ("subgroupSizeControl", "computeFullSubgroups", "synchronization2", "maintenance4",
            "shaderIntegerDotProduct", "shaderZeroInitializeWorkgroupMemory"),
}
_FEATURE_STRUCTS = {
    "1.1": ("VkPhysicalDeviceVulkan11Features", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES", API_1_2),
    "1.2": ("VkPhysicalDeviceVulkan12Features", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES", API_1_2),
    "1.3": ("VkPhysicalDeviceVulkan13Features", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES", API_1_3),
}
_DATACENTER = {  # per vendor, so that e.g. Intel's consumer "Arc A770" is not taken for an NVIDIA A100
    Vendor.NVIDIA: re.compile(r"\b([ABHL]\d{2,3}[A-Z]?|G[BH]\d{3}|Tesla|Data ?Center)\b", re.I),
    Vendor.AMD: re.compile(r"\b(MI\d{2,3}[A-Z]?|Instinct)\b", re.I),
    Vendor.INTEL: re.compile(r"\b(Data ?Center|Max \d{4})\b", re.I),
}
_WORKSTATION = re.compile(r"\b(Quadro|RTX A\d{3,4}|RTX \d{4} Ada|Radeon Pro|Arc Pro)\b", re.I)


@dataclass(frozen=True)
class MemoryType:
    index: int
    flags: int
    heap: int


@dataclass(frozen=True)
class QueueFamily:
    index: int
    flags: int
    count: int
    timestamp_bits: int


@dataclass(frozen=True)
class PhysicalDeviceInfo:
    """Everything ironaccel reads off one physical device."""

    ordinal: int
    name: str
    vendor_id: int
    device_id: int
    device_type: int
    api_version: int
    driver_version: int
    driver_name: str
    driver_info: str
    device_uuid: str
    limits: dict[str, Any]
    subgroup: dict[str, Any]
    features: dict[str, bool]
    memory_types: tuple[MemoryType, ...]
    memory_heaps: tuple[tuple[int, int], ...]  # (size, flags)
    queue_families: tuple[QueueFamily, ...]
    extensions: frozenset[str] = field(default_factory=frozenset)

    @property
    def vendor(self) -> Vendor:
        return Vendor.from_pci_id(self.vendor_id)

    @property
    def device_local_bytes(self) -> int:
        return sum(size for size, flags in self.memory_heaps if flags & HEAP_DEVICE_LOCAL)

    @property
    def unified_memory(self) -> bool:
        """True when device-local memory is also host-visible and coherent (CPU and integrated devices)."""
        want = MEMORY_DEVICE_LOCAL | MEMORY_HOST_VISIBLE | MEMORY_HOST_COHERENT
        return self.device_type in (TYPE_CPU, TYPE_INTEGRATED) and any(
            t.flags & want == want for t in self.memory_types
        )

    def compute_family(self) -> QueueFamily | None:
        """The queue family to compute on: a compute-only family if there is one, else any with compute."""
        families = [q for q in self.queue_families if q.flags & QUEUE_COMPUTE and q.count]
        dedicated = [q for q in families if not q.flags & QUEUE_GRAPHICS]
        chosen = dedicated or families
        return chosen[0] if chosen else None

    def driver_version_string(self) -> str:
        v = self.driver_version
        if self.vendor_id == 0x10DE:  # NVIDIA: 10.8.8.6 bits
            return f"{v >> 22}.{(v >> 14) & 0xFF}.{(v >> 6) & 0xFF}.{v & 0x3F}"
        return version_string(v)

    def capabilities(self) -> CapabilityFlags:
        f = self.features
        caps = CapabilityFlags.NONE
        for name, flag in (("shaderFloat16", CapabilityFlags.FP16), ("shaderFloat64", CapabilityFlags.FP64),
                           ("shaderInt8", CapabilityFlags.INT8)):
            if f.get(name):
                caps |= flag
        if self.subgroup.get("stages", 0) & STAGE_COMPUTE and self.subgroup.get("operations", 0) & SUBGROUP_BASIC:
            caps |= CapabilityFlags.SUBGROUPS
        family = self.compute_family()
        if family is not None and family.timestamp_bits:
            caps |= CapabilityFlags.TIMESTAMPS
        if any(t.flags & MEMORY_HOST_VISIBLE for t in self.memory_types):
            caps |= CapabilityFlags.HOST_MAPPED_MEMORY
        if {"VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix"} & self.extensions:
            caps |= CapabilityFlags.MATRIX_UNITS
        if "VK_KHR_shader_bfloat16" in self.extensions:
            caps |= CapabilityFlags.BF16
        transfer_only = [q for q in self.queue_families if q.flags & QUEUE_TRANSFER
                         and not q.flags & (QUEUE_COMPUTE | QUEUE_GRAPHICS)]
        if transfer_only:
            caps |= CapabilityFlags.ASYNC_COPY
        return caps

    def tier(self) -> ComputeTier:
        if self.device_type == TYPE_CPU:
            return ComputeTier.SOFTWARE
        if self.vendor in (Vendor.QUALCOMM, Vendor.ARM, Vendor.IMAGINATION):
            return ComputeTier.MOBILE
        datacenter = _DATACENTER.get(self.vendor)
        if self.device_type == TYPE_DISCRETE and datacenter is not None and datacenter.search(self.name):
            return ComputeTier.DATACENTER
        if self.device_type == TYPE_DISCRETE and _WORKSTATION.search(self.name):
            return ComputeTier.WORKSTATION
        return ComputeTier.CONSUMER

    def descriptor(self) -> DeviceDescriptor:
        return DeviceDescriptor(
            backend=BACKEND,
            ordinal=self.ordinal,
            name=self.name,
            vendor=self.vendor,
            kind=DeviceKind.CPU if self.device_type == TYPE_CPU else DeviceKind.GPU,
            memory_bytes=self.device_local_bytes,
            compute_tier=self.tier(),
            capabilities=self.capabilities(),
            extras={
                "api_version": version_string(self.api_version),
                "device_type": DEVICE_TYPES.get(self.device_type, str(self.device_type)),
                "vendor_id": f"0x{self.vendor_id:04x}",
                "device_id": f"0x{self.device_id:04x}",
                "driver_version": self.driver_version_string(),
                "driver_name": self.driver_name,
                "driver_info": self.driver_info,
                "device_uuid": self.device_uuid,
                "subgroup_size": self.subgroup.get("size", 0),
                "subgroup_size_range": (self.subgroup.get("min_size", 0), self.subgroup.get("max_size", 0)),
                "subgroup_operations": [n for bit, n in SUBGROUP_OPS.items() if self.subgroup.get("operations", 0)
                                        & bit],
                "unified_memory": self.unified_memory,
                "memory_heaps": [{"bytes": s, "device_local": bool(fl & HEAP_DEVICE_LOCAL)}
                                 for s, fl in self.memory_heaps],
                "fp16": bool(self.features.get("shaderFloat16")),
                "int8": bool(self.features.get("shaderInt8")),
                "float64": bool(self.features.get("shaderFloat64")),
                "int64": bool(self.features.get("shaderInt64")),
                **self.limits,
            },
        )


def read_info(binding: Binding, handle: Any, ordinal: int, instance_api: int) -> PhysicalDeviceInfo:
    """Read one physical device's properties, features, memory and queues."""
    ffi, lib, vk = binding.ffi, binding.lib, binding.module
    base = ffi.new("VkPhysicalDeviceProperties*")
    lib.vkGetPhysicalDeviceProperties(handle, base)
    api = min(base.apiVersion, instance_api)
    keep: list[Any] = []

    def chain(root: Any, structs: list[tuple[str, str]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        tail = root
        for ctype, stype in structs:
            s = ffi.new(f"{ctype}*", {"sType": getattr(vk, stype)})
            keep.append(s)
            tail.pNext = s
            tail = s
            out[ctype] = s
        return out

    subgroup: dict[str, Any] = {}
    driver_name = driver_info = uuid = ""
    max_alloc = max_buffer = None
    if api >= API_1_1:
        props2 = ffi.new("VkPhysicalDeviceProperties2*", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2})
        wanted = [
            ("VkPhysicalDeviceSubgroupProperties", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES"),
            ("VkPhysicalDeviceMaintenance3Properties", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES"),
            ("VkPhysicalDeviceIDProperties", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES"),
        ]
        if api >= API_1_2:
            wanted.append(("VkPhysicalDeviceDriverProperties", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES"))
        if api >= API_1_3:
            wanted += [
                ("VkPhysicalDeviceMaintenance4Properties",
                 "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES"),
                ("VkPhysicalDeviceSubgroupSizeControlProperties",
                 "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES"),
            ]
        got = chain(props2, wanted)
        lib.vkGetPhysicalDeviceProperties2(handle, props2)
        sg = got["VkPhysicalDeviceSubgroupProperties"]
        subgroup = {"size": sg.subgroupSize, "stages": sg.supportedStages, "operations": sg.supportedOperations,
                    "min_size": sg.subgroupSize, "max_size": sg.subgroupSize}
        if "VkPhysicalDeviceSubgroupSizeControlProperties" in got:
            sc = got["VkPhysicalDeviceSubgroupSizeControlProperties"]
            subgroup.update(min_size=sc.minSubgroupSize, max_size=sc.maxSubgroupSize)
        max_alloc = got["VkPhysicalDeviceMaintenance3Properties"].maxMemoryAllocationSize
        uuid = bytes(ffi.buffer(got["VkPhysicalDeviceIDProperties"].deviceUUID)).hex()
        if "VkPhysicalDeviceDriverProperties" in got:
            drv = got["VkPhysicalDeviceDriverProperties"]
            driver_name = ffi.string(drv.driverName).decode(errors="replace")
            driver_info = ffi.string(drv.driverInfo).decode(errors="replace")
        if "VkPhysicalDeviceMaintenance4Properties" in got:
            max_buffer = got["VkPhysicalDeviceMaintenance4Properties"].maxBufferSize

    features = _read_features(binding, handle, api)
    limits = base.limits
    limit_values = {
        "max_workgroup_size": tuple(limits.maxComputeWorkGroupSize),
        "max_workgroup_invocations": limits.maxComputeWorkGroupInvocations,
        "max_workgroup_count": tuple(limits.maxComputeWorkGroupCount),
        "max_shared_memory_bytes": limits.maxComputeSharedMemorySize,
        "max_storage_buffer_range": limits.maxStorageBufferRange,
        "max_push_constants_bytes": limits.maxPushConstantsSize,
        "max_storage_buffers_per_stage": limits.maxPerStageDescriptorStorageBuffers,
        "max_memory_allocation_bytes": max_alloc or (1 << 31),
        "max_buffer_bytes": max_buffer or max_alloc or (1 << 31),
        "max_memory_allocations": limits.maxMemoryAllocationCount,
        "min_storage_buffer_offset_alignment": limits.minStorageBufferOffsetAlignment,
        "non_coherent_atom_bytes": limits.nonCoherentAtomSize,
        "timestamp_period_ns": limits.timestampPeriod,
    }

    mem = ffi.new("VkPhysicalDeviceMemoryProperties*")
    lib.vkGetPhysicalDeviceMemoryProperties(handle, mem)
    memory_types = tuple(
        MemoryType(i, mem.memoryTypes[i].propertyFlags, mem.memoryTypes[i].heapIndex)
        for i in range(mem.memoryTypeCount)
    )
    memory_heaps = tuple((mem.memoryHeaps[i].size, mem.memoryHeaps[i].flags) for i in range(mem.memoryHeapCount))

    count = ffi.new("uint32_t*")
    lib.vkGetPhysicalDeviceQueueFamilyProperties(handle, count, ffi.NULL)
    fams = ffi.new("VkQueueFamilyProperties[]", count[0])
    lib.vkGetPhysicalDeviceQueueFamilyProperties(handle, count, fams)
    queue_families = tuple(
        QueueFamily(i, fams[i].queueFlags, fams[i].queueCount, fams[i].timestampValidBits) for i in range(count[0])
    )

    return PhysicalDeviceInfo(
        ordinal=ordinal,
        name=ffi.string(base.deviceName).decode(errors="replace"),
        vendor_id=base.vendorID,
        device_id=base.deviceID,
        device_type=base.deviceType,
        api_version=base.apiVersion,
        driver_version=base.driverVersion,
        driver_name=driver_name,
        driver_info=driver_info,
        device_uuid=uuid,
        limits=limit_values,
        subgroup=subgroup,
        features=features,
        memory_types=memory_types,
        memory_heaps=memory_heaps,
        queue_families=queue_families,
        extensions=frozenset(_device_extensions(binding, handle)),
    )


def feature_chain(binding: Binding, api: int, values: dict[str, bool] | None = None) -> tuple[Any, list[Any]]:
    """A VkPhysicalDeviceFeatures2 chain for `api`: empty (to query) or set from `values` (to enable)."""
    ffi, vk = binding.ffi, binding.module
    root = ffi.new("VkPhysicalDeviceFeatures2*", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2})
    structs = [root]
    tail = root
    for key, (ctype, stype, min_api) in _FEATURE_STRUCTS.items():
        if api < min_api:
            continue
        s = ffi.new(f"{ctype}*", {"sType": getattr(vk, stype)})
        if values is not None:
            for name in ENABLED_FEATURES[key]:
                setattr(s, name, int(bool(values.get(name))))
        tail.pNext = s
        tail = s
        structs.append(s)
    if values is not None:
        for name in ENABLED_FEATURES["core"]:
            setattr(root.features, name, int(bool(values.get(name))))
    return root, structs


def _read_features(binding: Binding, handle: Any, api: int) -> dict[str, bool]:
    ffi, lib = binding.ffi, binding.lib
    if api < API_1_1:
        core = ffi.new("VkPhysicalDeviceFeatures*")
        lib.vkGetPhysicalDeviceFeatures(handle, core)
        return {name: bool(getattr(core, name)) for name in ENABLED_FEATURES["core"]}
    root, structs = feature_chain(binding, api)
    lib.vkGetPhysicalDeviceFeatures2(handle, root)
    out = {name: bool(getattr(root.features, name)) for name in ENABLED_FEATURES["core"]}
    keys = [k for k, (_, _, min_api) in _FEATURE_STRUCTS.items() if api >= min_api]
    for key, s in zip(keys, structs[1:]):
        out.update({name: bool(getattr(s, name)) for name in ENABLED_FEATURES[key]})
    return out


def _device_extensions(binding: Binding, handle: Any) -> list[str]:
    ffi, lib = binding.ffi, binding.lib
    count = ffi.new("uint32_t*")
    if lib.vkEnumerateDeviceExtensionProperties(handle, ffi.NULL, count, ffi.NULL) != 0:
        return []
    props = ffi.new("VkExtensionProperties[]", count[0])
    if lib.vkEnumerateDeviceExtensionProperties(handle, ffi.NULL, count, props) != 0:
        return []
    return [ffi.string(props[i].extensionName).decode() for i in range(count[0])]
