"""hipDeviceProp_t -> DeviceDescriptor: capability flags and tier from AMD's tables.

Pure translation, no HIP calls: it takes any object with hipDeviceProp_t's
attribute names (hip-python's struct wrapper, or a test's namespace), so the
rules are tested without a GPU.

What comes from where:
* from the properties: memory (totalGlobalMem), unified addressing, managed
  memory, host-mapped memory, memory pools, cooperative launch, copy engines
  (asyncEngineCount), FP64 (arch.hasDoubles);
* from the ISA (gcnArchName, e.g. ``gfx90a:sramecc+:xnack-``): matrix units
  (MFMA on CDNA gfx908/gfx90a/gfx94x/gfx95x, WMMA on RDNA3/4 gfx11xx/gfx12xx),
  BF16 and INT8 dot products;
* always on HIP: FP16, graphs, event timestamps, wavefront operations, hipRTC.
"""

from __future__ import annotations

from typing import Any

from ironaccel.types import CapabilityFlags, ComputeTier, DeviceDescriptor, DeviceKind, Vendor

BACKEND = "rocm"

#: CDNA data-centre ISAs (Instinct MI100, MI200, MI300, MI350).
DATACENTER_ISAS = ("gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950")
#: ISAs with matrix instructions: MFMA (CDNA) or WMMA (RDNA3, RDNA4).
_MATRIX_PREFIXES = ("gfx908", "gfx90a", "gfx94", "gfx95", "gfx11", "gfx12")
#: ISAs with bf16 arithmetic (matrix or dot instructions).
_BF16_PREFIXES = ("gfx908", "gfx90a", "gfx94", "gfx95", "gfx11", "gfx12")
#: ISAs without packed int8 dot products (v_dot4_i32_i8): GCN before Vega 20, and Navi 10.
_NO_INT8_PREFIXES = ("gfx6", "gfx7", "gfx8", "gfx900", "gfx902", "gfx904", "gfx909", "gfx90c", "gfx1010")

_ALWAYS = (
    CapabilityFlags.FP16
    | CapabilityFlags.GRAPHS
    | CapabilityFlags.TIMESTAMPS
    | CapabilityFlags.SUBGROUPS
    | CapabilityFlags.RUNTIME_COMPILE
)


def text(value: Any) -> str:
    """A C char array from hip-python (bytes, str or a char sequence) as str."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).split(b"\0", 1)[0].decode(errors="replace")
    if isinstance(value, str):
        return value.split("\0", 1)[0]
    try:
        return bytes(int(c) & 0xFF for c in value).split(b"\0", 1)[0].decode(errors="replace")
    except TypeError:
        return str(value)


def isa_of(gcn_arch_name: str) -> str:
    """``gfx90a:sramecc+:xnack-`` -> ``gfx90a``."""
    return gcn_arch_name.split(":", 1)[0].strip()


def capabilities(props: Any, isa: str, *, peer_access: bool = False) -> CapabilityFlags:
    flags = _ALWAYS
    arch = getattr(props, "arch", None)
    if arch is None or getattr(arch, "hasDoubles", True):
        flags |= CapabilityFlags.FP64
    if isa.startswith(_BF16_PREFIXES):
        flags |= CapabilityFlags.BF16
    if isa and not isa.startswith(_NO_INT8_PREFIXES):
        flags |= CapabilityFlags.INT8
    if isa.startswith(_MATRIX_PREFIXES):
        flags |= CapabilityFlags.MATRIX_UNITS
    for attr, flag in (
        ("unifiedAddressing", CapabilityFlags.UNIFIED_ADDRESSING),
        ("managedMemory", CapabilityFlags.MANAGED_MEMORY),
        ("canMapHostMemory", CapabilityFlags.HOST_MAPPED_MEMORY),
        ("memoryPoolsSupported", CapabilityFlags.MEMORY_POOLS),
        ("cooperativeLaunch", CapabilityFlags.COOPERATIVE_LAUNCH),
    ):
        if getattr(props, attr, 0):
            flags |= flag
    if getattr(props, "asyncEngineCount", 0):
        flags |= CapabilityFlags.ASYNC_COPY
    if peer_access:
        flags |= CapabilityFlags.PEER_ACCESS
    return flags


def tier(name: str, isa: str, integrated: bool) -> ComputeTier:
    if isa in DATACENTER_ISAS or "instinct" in name.lower():
        return ComputeTier.DATACENTER
    if integrated:
        return ComputeTier.CONSUMER
    if "radeon pro" in name.lower() or " pro " in f" {name.lower()} ":
        return ComputeTier.WORKSTATION
    return ComputeTier.CONSUMER


def describe(ordinal: int, props: Any, *, peer_access: bool = False) -> DeviceDescriptor:
    """The DeviceDescriptor of device `ordinal` from its hipDeviceProp_t."""
    name = text(getattr(props, "name", b"")) or f"AMD GPU {ordinal}"
    gcn = text(getattr(props, "gcnArchName", b""))
    isa = isa_of(gcn)
    integrated = bool(getattr(props, "integrated", 0))
    extras = {
        "isa": isa,
        "gcn_arch_name": gcn,
        "compute_units": int(getattr(props, "multiProcessorCount", 0)),
        "wavefront_size": int(getattr(props, "warpSize", 0)),
        "clock_khz": int(getattr(props, "clockRate", 0)),
        "max_threads_per_block": int(getattr(props, "maxThreadsPerBlock", 0)),
        "shared_memory_per_block": int(getattr(props, "sharedMemPerBlock", 0)),
        "l2_cache_bytes": int(getattr(props, "l2CacheSize", 0)),
        "pci_bus_id": "{:04x}:{:02x}:{:02x}".format(
            int(getattr(props, "pciDomainID", 0)), int(getattr(props, "pciBusID", 0)),
            int(getattr(props, "pciDeviceID", 0)),
        ),
        "integrated": integrated,
        "ecc": bool(getattr(props, "ECCEnabled", 0)),
    }
    return DeviceDescriptor(
        backend=BACKEND,
        ordinal=ordinal,
        name=name,
        vendor=Vendor.AMD,
        kind=DeviceKind.GPU,
        memory_bytes=int(getattr(props, "totalGlobalMem", 0)),
        compute_tier=tier(name, isa, integrated),
        capabilities=capabilities(props, isa, peer_access=peer_access),
        extras=extras,
    )
