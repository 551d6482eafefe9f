"""Mapping Vulkan device facts to ironaccel's descriptor, without a device."""

from __future__ import annotations

import pytest

from ironaccel.types import CapabilityFlags, ComputeTier, DeviceKind, Vendor
from ironaccel_vulkan.physical import MemoryType, PhysicalDeviceInfo, QueueFamily


def info(name: str, vendor_id: int, device_type: int = 2, **kw: object) -> PhysicalDeviceInfo:
    fields: dict = dict(ordinal=0, name=name, vendor_id=vendor_id, device_id=0, device_type=device_type,
                        api_version=(1 << 22) | (3 << 12), driver_version=0, driver_name="", driver_info="",
                        device_uuid="", limits={}, subgroup={}, features={}, memory_types=(), memory_heaps=(),
                        queue_families=())
    fields.update(kw)
    return PhysicalDeviceInfo(**fields)


@pytest.mark.parametrize("name,vendor_id,device_type,tier", [
    ("NVIDIA H200", 0x10DE, 2, ComputeTier.DATACENTER),
    ("NVIDIA A100-SXM4-80GB", 0x10DE, 2, ComputeTier.DATACENTER),
    ("NVIDIA L40S", 0x10DE, 2, ComputeTier.DATACENTER),
    ("AMD Instinct MI300X", 0x1002, 2, ComputeTier.DATACENTER),
    ("NVIDIA RTX A6000", 0x10DE, 2, ComputeTier.WORKSTATION),
    ("NVIDIA GeForce RTX 4090", 0x10DE, 2, ComputeTier.CONSUMER),
    ("Intel(R) Arc(tm) A770 Graphics (DG2)", 0x8086, 2, ComputeTier.CONSUMER),
    ("Intel(R) UHD Graphics 770", 0x8086, 1, ComputeTier.CONSUMER),
    ("Adreno (TM) 740", 0x5143, 1, ComputeTier.MOBILE),
    ("llvmpipe (LLVM 15.0.6, 256 bits)", 0x10005, 4, ComputeTier.SOFTWARE),
])
def test_compute_tier(name: str, vendor_id: int, device_type: int, tier: ComputeTier) -> None:
    assert info(name, vendor_id, device_type).tier() is tier


def test_descriptor_of_a_discrete_gpu() -> None:
    gpu = info(
        "NVIDIA H200", 0x10DE,
        driver_version=(580 << 22) | (159 << 14) | (4 << 6),
        features={"shaderFloat16": True, "shaderInt8": True, "shaderFloat64": True},
        subgroup={"size": 32, "stages": 0x20, "operations": 0xFF},
        memory_types=(MemoryType(0, 0x1, 0), MemoryType(1, 0x6, 1), MemoryType(2, 0xE, 1)),
        memory_heaps=((150 << 30, 0x1), (64 << 30, 0)),
        queue_families=(QueueFamily(0, 0x7, 16, 64), QueueFamily(1, 0x4, 2, 64), QueueFamily(2, 0x6, 8, 64)),
        extensions=frozenset({"VK_KHR_cooperative_matrix"}),
    )
    d = gpu.descriptor()
    assert d.kind is DeviceKind.GPU and d.vendor is Vendor.NVIDIA and d.memory_bytes == 150 << 30
    for flag in ("FP16", "INT8", "FP64", "SUBGROUPS", "TIMESTAMPS", "HOST_MAPPED_MEMORY", "MATRIX_UNITS",
                 "ASYNC_COPY"):
        assert getattr(CapabilityFlags, flag) in d.capabilities, flag
    assert CapabilityFlags.BF16 not in d.capabilities
    assert d.extras["driver_version"] == "580.159.4.0"
    assert not gpu.unified_memory
    assert gpu.compute_family() is not None and gpu.compute_family().index == 2  # compute without graphics


def test_a_cpu_device_is_unified() -> None:
    cpu = info("llvmpipe", 0x10005, 4, memory_types=(MemoryType(0, 0xF, 0),), memory_heaps=((2 << 30, 1),),
               queue_families=(QueueFamily(0, 0x7, 1, 64),))
    d = cpu.descriptor()
    assert cpu.unified_memory and d.kind is DeviceKind.CPU and d.compute_tier is ComputeTier.SOFTWARE
    assert d.vendor is Vendor.MESA and cpu.compute_family().index == 0
