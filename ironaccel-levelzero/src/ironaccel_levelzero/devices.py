"""Walk drivers and devices (zeDriverGet, zeDeviceGet, zeDeviceGet*Properties) into DeviceDescriptors.

`query` makes the calls; `describe` is the pure translation from the spec's
structs, so its rules are tested without a driver.  Capability flags come
from the spec's own tables: module flags (FP16, FP64, DP4A -> INT8), device
flags (on-demand paging -> managed memory), command-queue groups (a copy-only
group -> async copy; cooperative kernels), subgroup sizes, timestamp bits.
Level Zero's unified shared memory gives every device unified addressing and
host-mapped memory.  Matrix engines (XMX) and BF16 are not in the core spec
and are not claimed.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ironaccel.types import CapabilityFlags, ComputeTier, DeviceDescriptor, DeviceKind, Vendor

from . import structs
from .loader import BACKEND, Loader, check


@dataclass
class DeviceInfo:
    """Everything the probe read about one device."""

    driver_index: int
    driver_version: int
    api_version: int
    props: structs.DeviceProperties
    compute: structs.DeviceComputeProperties
    module: structs.DeviceModuleProperties
    memory: list[structs.DeviceMemoryProperties]
    queue_groups: list[structs.CommandQueueGroupProperties]


def _handles(fn, op: str, *parent: object) -> list[int]:
    count = ctypes.c_uint32(0)
    check(fn(*parent, ctypes.byref(count), None), op)
    if count.value == 0:
        return []
    handles = (ctypes.c_void_p * count.value)()
    check(fn(*parent, ctypes.byref(count), handles), op)
    return [h for h in handles[: count.value] if h]


def drivers(loader: Loader) -> list[int]:
    """Driver handles (zeDriverGet); raises the typed error of a failed call."""
    return _handles(loader.lib.zeDriverGet, "zeDriverGet")


def devices_of(loader: Loader, driver: int) -> list[int]:
    return _handles(loader.lib.zeDeviceGet, "zeDeviceGet", ctypes.c_void_p(driver))


def _array(loader: Loader, fn_name: str, cls: type, device: ctypes.c_void_p) -> list:
    fn = getattr(loader.lib, fn_name)
    count = ctypes.c_uint32(0)
    check(fn(device, ctypes.byref(count), None), fn_name)
    if count.value == 0:
        return []
    items = structs.new(cls, count.value)
    check(fn(device, ctypes.byref(count), items), fn_name)
    return list(items[: count.value])


def query(loader: Loader) -> list[DeviceInfo]:
    """Read every device of every driver."""
    lib = loader.lib
    out: list[DeviceInfo] = []
    for index, driver in enumerate(drivers(loader)):
        handle = ctypes.c_void_p(driver)
        api = ctypes.c_uint32(0)
        check(lib.zeDriverGetApiVersion(handle, ctypes.byref(api)), "zeDriverGetApiVersion")
        dprops = structs.new(structs.DriverProperties)
        check(lib.zeDriverGetProperties(handle, ctypes.byref(dprops)), "zeDriverGetProperties")
        for device in devices_of(loader, driver):
            dev = ctypes.c_void_p(device)
            props = structs.new(structs.DeviceProperties)
            check(lib.zeDeviceGetProperties(dev, ctypes.byref(props)), "zeDeviceGetProperties")
            compute = structs.new(structs.DeviceComputeProperties)
            check(lib.zeDeviceGetComputeProperties(dev, ctypes.byref(compute)), "zeDeviceGetComputeProperties")
            module = structs.new(structs.DeviceModuleProperties)
            check(lib.zeDeviceGetModuleProperties(dev, ctypes.byref(module)), "zeDeviceGetModuleProperties")
            memory = _array(loader, "zeDeviceGetMemoryProperties", structs.DeviceMemoryProperties, dev)
            groups = _array(loader, "zeDeviceGetCommandQueueGroupProperties", structs.CommandQueueGroupProperties, dev)
            out.append(DeviceInfo(index, dprops.driverVersion, api.value, props, compute, module, memory, groups))
    return out


_KINDS = {1: DeviceKind.GPU, 2: DeviceKind.CPU, 5: DeviceKind.NPU}


def capabilities(info: DeviceInfo) -> CapabilityFlags:
    flags = CapabilityFlags.UNIFIED_ADDRESSING | CapabilityFlags.HOST_MAPPED_MEMORY
    module, props = info.module, info.props
    if module.flags & structs.MODULE_FLAG_FP16:
        flags |= CapabilityFlags.FP16
    if module.flags & structs.MODULE_FLAG_FP64:
        flags |= CapabilityFlags.FP64
    if module.flags & structs.MODULE_FLAG_DP4A:
        flags |= CapabilityFlags.INT8
    if module.spirvVersionSupported:
        flags |= CapabilityFlags.RUNTIME_COMPILE  # SPIR-V is compiled to the device at module creation
    if props.flags & structs.DEVICE_FLAG_ONDEMANDPAGING:
        flags |= CapabilityFlags.MANAGED_MEMORY
    if info.compute.numSubGroupSizes:
        flags |= CapabilityFlags.SUBGROUPS
    if props.kernelTimestampValidBits or props.timestampValidBits:
        flags |= CapabilityFlags.TIMESTAMPS
    for group in info.queue_groups:
        if group.flags & structs.QUEUE_GROUP_COPY and not group.flags & structs.QUEUE_GROUP_COMPUTE:
            flags |= CapabilityFlags.ASYNC_COPY
        if group.flags & structs.QUEUE_GROUP_COOPERATIVE_KERNELS:
            flags |= CapabilityFlags.COOPERATIVE_LAUNCH
    return flags


def tier(name: str, kind: DeviceKind) -> ComputeTier:
    lowered = name.lower()
    if "data center" in lowered or " max " in f" {lowered} " or "flex" in lowered or "gaudi" in lowered:
        return ComputeTier.DATACENTER
    if "arc pro" in lowered:
        return ComputeTier.WORKSTATION
    if kind is DeviceKind.CPU and "llvm" in lowered:
        return ComputeTier.SOFTWARE
    return ComputeTier.CONSUMER


def describe(ordinal: int, info: DeviceInfo) -> DeviceDescriptor:
    """The DeviceDescriptor of one device, from the structs `query` read."""
    props, compute = info.props, info.compute
    name = props.name.decode(errors="replace") or f"Level Zero device {ordinal}"
    kind = _KINDS.get(props.type, DeviceKind.GPU)
    integrated = bool(props.flags & structs.DEVICE_FLAG_INTEGRATED)
    extras = {
        "type": structs.DEVICE_TYPES.get(props.type, str(props.type)),
        "vendor_id": f"0x{props.vendorId:04x}",
        "device_id": f"0x{props.deviceId:04x}",
        "uuid": bytes(props.uuid.id).hex(),
        "driver": info.driver_index,
        "driver_version": info.driver_version,
        "api_version": structs.version_text(info.api_version),
        "integrated": integrated,
        "ecc": bool(props.flags & structs.DEVICE_FLAG_ECC),
        "execution_units": props.numSlices * props.numSubslicesPerSlice * props.numEUsPerSubslice,
        "threads_per_eu": props.numThreadsPerEU,
        "simd_width": props.physicalEUSimdWidth,
        "core_clock_mhz": props.coreClockRate,
        "max_alloc_bytes": props.maxMemAllocSize,
        "max_group_size": compute.maxTotalGroupSize,
        "max_group_count": (compute.maxGroupCountX, compute.maxGroupCountY, compute.maxGroupCountZ),
        "shared_local_memory": compute.maxSharedLocalMemory,
        "subgroup_sizes": list(compute.subGroupSizes[: min(compute.numSubGroupSizes, structs.SUBGROUPSIZE_COUNT)]),
        "spirv_version": structs.version_text(info.module.spirvVersionSupported),
    }
    return DeviceDescriptor(
        backend=BACKEND,
        ordinal=ordinal,
        name=name,
        vendor=Vendor.from_pci_id(props.vendorId),
        kind=kind,
        memory_bytes=sum(int(m.totalSize) for m in info.memory),
        compute_tier=tier(name, kind),
        capabilities=capabilities(info),
        extras=extras,
    )
