"""cuda.core's `VirtualMemoryResource` over ironaccel's `VirtualBuffer` (cuMemAddressReserve / cuMemCreate / cuMemMap).

Each `allocate` is one ironaccel VirtualBuffer, reserved and mapped to the size
rounded up to the options' granularity (so `Buffer.size` may be larger than
asked, as in cuda.core).  `modify_allocation` grows a buffer in place: when the
new size needs more than its reservation, it reserves a larger one, copies the
bytes across and frees the old one (the address changes; cuda.core remaps the
physical memory instead).  Allocation and freeing are synchronous; freeing
waits for the device (ironaccel unmaps only an idle device's memory).

Supported: pinned device memory, handle type POSIX fd or none, both
granularities, GPUDirect RDMA, self and peer access.  Host locations, managed
allocations, address hints and alignments other than the granularity are
refused (NotImplementedError).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .. import _ia
from .._utils.cuda_utils import check_or_create_options, driver, from_ironaccel, guarded
from ._buffer import Buffer, MemoryResource

__all__ = ["VirtualMemoryResource", "VirtualMemoryResourceOptions"]

_new = object.__new__


def _lookup(table: dict[Any, Any], spec: Any, what: str) -> Any:
    key = getattr(spec, "value", spec)
    if key not in table:
        raise ValueError(f"Unsupported {what}: {spec!r}")
    return table[key]


@dataclass
class VirtualMemoryResourceOptions:
    """How a VirtualMemoryResource calls the driver's virtual memory management (see the module docstring)."""

    allocation_type: Any = "pinned"
    location_type: Any = "device"
    handle_type: Any = "posix_fd"
    granularity: Any = "recommended"
    gpu_direct_rdma: bool = False
    addr_hint: int | None = 0
    addr_align: int | None = None
    peers: Iterable[int] = field(default_factory=tuple)
    self_access: Any = "rw"
    peer_access: Any = "rw"

    _ACCESS: ClassVar[dict[Any, int]] = {"rw": 3, "r": 1, None: 0}
    _ALLOCATION: ClassVar[dict[str, str]] = {"pinned": "CU_MEM_ALLOCATION_TYPE_PINNED",
                                             "managed": "CU_MEM_ALLOCATION_TYPE_MANAGED"}
    _LOCATION: ClassVar[dict[str, str]] = {"device": "CU_MEM_LOCATION_TYPE_DEVICE", "host": "CU_MEM_LOCATION_TYPE_HOST",
                                           "host_numa": "CU_MEM_LOCATION_TYPE_HOST_NUMA",
                                           "host_numa_current": "CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT"}
    _HANDLE: ClassVar[dict[Any, str]] = {None: "CU_MEM_HANDLE_TYPE_NONE",
                                         "posix_fd": "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR",
                                         "win32_kmt": "CU_MEM_HANDLE_TYPE_WIN32_KMT",
                                         "fabric": "CU_MEM_HANDLE_TYPE_FABRIC"}
    _GRANULARITY: ClassVar[dict[str, str]] = {"minimum": "CU_MEM_ALLOC_GRANULARITY_MINIMUM",
                                              "recommended": "CU_MEM_ALLOC_GRANULARITY_RECOMMENDED"}

    @staticmethod
    def _access_to_flags(spec: Any) -> int:
        key = getattr(spec, "value", spec)
        if key not in VirtualMemoryResourceOptions._ACCESS:
            raise ValueError(f"Unknown access spec: {spec!r}")
        return VirtualMemoryResourceOptions._ACCESS[key]

    @staticmethod
    def _allocation_type_to_driver(spec: Any) -> Any:
        name = _lookup(VirtualMemoryResourceOptions._ALLOCATION, spec, "allocation_type")
        return getattr(driver.CUmemAllocationType, name)

    @staticmethod
    def _location_type_to_driver(spec: Any) -> Any:
        return getattr(driver.CUmemLocationType, _lookup(VirtualMemoryResourceOptions._LOCATION, spec,
                                                         "location_type"))

    @staticmethod
    def _handle_type_to_driver(spec: Any) -> Any:
        if spec == "win32":
            raise NotImplementedError("win32 is currently not supported (use 'win32_kmt' on Windows)")
        return getattr(driver.CUmemAllocationHandleType, _lookup(VirtualMemoryResourceOptions._HANDLE, spec,
                                                                 "handle_type"))

    @staticmethod
    def _granularity_to_driver(spec: Any) -> Any:
        return getattr(driver.CUmemAllocationGranularity_flags,
                       _lookup(VirtualMemoryResourceOptions._GRANULARITY, spec, "granularity"))


def _check_supported(config: VirtualMemoryResourceOptions) -> None:
    """What ironaccel's VirtualBuffer makes; NotImplementedError (after validating) for the rest."""
    opts = VirtualMemoryResourceOptions
    opts._allocation_type_to_driver(config.allocation_type)
    opts._location_type_to_driver(config.location_type)
    handle = opts._handle_type_to_driver(config.handle_type)
    opts._granularity_to_driver(config.granularity)
    opts._access_to_flags(config.self_access)
    opts._access_to_flags(config.peer_access)
    refused = []
    if getattr(config.allocation_type, "value", config.allocation_type) != "pinned":
        refused.append(f"allocation_type={config.allocation_type!r}")
    if getattr(config.location_type, "value", config.location_type) != "device":
        refused.append(f"location_type={config.location_type!r}")
    if int(handle) not in (0, int(driver.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)):
        refused.append(f"handle_type={config.handle_type!r}")
    if config.addr_hint:
        refused.append("addr_hint")
    if config.addr_align is not None:
        refused.append("addr_align")
    if getattr(config.self_access, "value", config.self_access) is None:
        refused.append("self_access=None")
    if refused:
        raise NotImplementedError("the compat's VirtualMemoryResource (ironaccel VirtualBuffer) makes pinned device "
                                  "memory only; not supported: " + ", ".join(refused))


class VirtualMemoryResource(MemoryResource):
    """Device memory from the driver's virtual memory management, one reservation per buffer."""

    __slots__ = ("device", "config", "_live")

    def __init__(self, device_id: Any, config: Any = None) -> None:
        from .._device import Device

        self.device = Device(device_id)
        self.config = check_or_create_options(VirtualMemoryResourceOptions, config, "VirtualMemoryResource options")
        if not self.device.properties.virtual_memory_management_supported:
            raise RuntimeError("VirtualMemoryResource requires CUDA VMM API support")
        if self.config.gpu_direct_rdma and not self.device.properties.gpu_direct_rdma_supported:
            raise RuntimeError("GPU Direct RDMA is not supported on this device")
        _check_supported(self.config)
        self._live: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()

    def _reserve(self, nbytes: int, config: VirtualMemoryResourceOptions) -> Any:
        """An ironaccel VirtualBuffer mapped to `nbytes` rounded up to the granularity, with the peers let in."""
        access = getattr(config.self_access, "value", config.self_access)
        try:
            vb = self.device.reserve(
                nbytes,
                exportable=getattr(config.handle_type, "value", config.handle_type) == "posix_fd",
                granularity=str(getattr(config.granularity, "value", config.granularity)),
                gpu_direct_rdma=bool(config.gpu_direct_rdma),
                self_access="read" if access == "r" else "readwrite")
            try:
                vb.resize(vb.capacity)
                peer = getattr(config.peer_access, "value", config.peer_access)
                for ordinal in config.peers:
                    if int(ordinal) != self.device.device_id:
                        vb.grant_access(int(ordinal), {"rw": "readwrite", "r": "read", None: "none"}[peer])
            except BaseException:
                vb.close()
                raise
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        return vb

    def allocate(self, size: int, *, stream: Any = None) -> Buffer:
        """`size` bytes (rounded up to the granularity) of mapped device memory; synchronous (`stream` is only
        validated)."""
        from .._stream import Stream_accept

        if stream is not None:
            Stream_accept(stream)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"size must be a non-negative int, got {size!r}")
        if size == 0:
            return Buffer._init(0, 0, self)
        vb = self._reserve(size, self.config)
        self._live[vb.ptr] = vb
        return Buffer._adopt(vb, vb.nbytes, self, None)

    def deallocate(self, ptr: Any, size: int, *, stream: Any = None) -> None:
        """Unmap and free the allocation at `ptr` (after the device is idle)."""
        from .._stream import Stream_accept

        if stream is not None:
            Stream_accept(stream).sync()
        vb = self._live.pop(int(ptr), None)
        if vb is not None:
            vb.close()

    def modify_allocation(self, buf: Buffer, new_size: int, config: Any = None) -> Buffer:
        """Grow `buf` to at least `new_size` bytes (a smaller size leaves it as it is); returns `buf`.

        `config` replaces the resource's options first (for this and later allocations).
        """
        if config is not None:
            cfg = check_or_create_options(VirtualMemoryResourceOptions, config, "VirtualMemoryResource options")
            _check_supported(cfg)
            self.config = cfg
        if not isinstance(buf, Buffer) or buf._mr is not self:
            raise ValueError("modify_allocation takes a Buffer allocated by this VirtualMemoryResource")
        if isinstance(new_size, bool) or not isinstance(new_size, int) or new_size < 0:
            raise ValueError(f"new_size must be a non-negative int, got {new_size!r}")
        if new_size <= buf._size:
            return buf
        old = buf._mem
        if old is not None and new_size <= old.capacity:
            try:
                old.resize(old.capacity)
            except _ia.DriverError as exc:
                raise from_ironaccel(exc) from None
            buf._size = old.nbytes
            return buf
        vb = self._reserve(new_size, self.config)
        if old is not None:
            guarded(self.device.synchronize)  # the old memory's work is done before it is read
            try:
                home = self.device._ia_default  # ironaccel's default stream of the device
                src, dst = old.view(stream=home), vb.view(stream=home)
                dst[:buf._size].copy_from(src[:buf._size])
                for view in (src, dst):
                    view.close()  # views over the reservations: closing frees nothing
            except _ia.DriverError as exc:
                raise from_ironaccel(exc) from None
            guarded(self.device.synchronize)
            self._live.pop(old.ptr, None)
            old.close()
        buf._mem = vb
        buf._ptr = vb.ptr
        buf._size = vb.nbytes
        buf._attrs = None
        buf._shared = None
        self._live[vb.ptr] = vb
        return buf

    @property
    def device_id(self) -> int:
        return int(self.device.device_id)

    @property
    def is_device_accessible(self) -> bool:
        return True

    @property
    def is_host_accessible(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<VirtualMemoryResource device={self.device.device_id}>"
