"""Device: one GPU, opened by ordinal, bound to its primary context.

`Device(0)` (or `ironaccel.open("cuda", 0)`) retains the device's primary
context once per process and makes it current on the opening thread; it is
kept until the process exits, so buffers, streams and modules stay valid
whatever order things are closed in.  Each `Device(...)` call returns a new
handle object over that shared state; `close()` retires the handle (and the
pools it created), never the context.

Calls that need a current context (creating streams, events, modules, pinned
memory; `synchronize`; `memory_info`) make the device's context current on
the calling thread unless this thread already did so through ironaccel;
`bind()` forces it (use it after other libraries switched devices on this
thread).  Stream-ordered calls need no current context.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

import numpy as np

from ironaccel import CapabilityFlags, ComputeTier, DeviceDescriptor, DeviceKind, DType, Vendor

from . import _core
from . import _driver as _driver_mod
from . import dtypes as _dtypes
from ._devices import (
    DeviceAttributes,
    DeviceState,
    cudevice,
    device_count,
    device_uuid,
    open_device,
    query_attributes,
    state_for,
    states,
)
from ._driver import call, driver, try_call
from .arrays import Array, SurfaceObject, TextureObject
from .compute import ComputeDeviceMixin
from .context import Context, context_at, split_sms
from .driver_pool import DriverPool
from .errors import InvalidArgument, Unsupported, closed, driver_error, invalid
from .event import CU_EVENT_BLOCKING_SYNC, CU_EVENT_DISABLE_TIMING, Event
from .memory import PinnedBuf, adopt
from .module import load_module
from .pitched import PitchedBuf
from .pool import MemPool
from .program import nvrtc_version
from .stream import CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, Stream, check_priority, implicit_stream
from .vmm import VirtualBuffer

__all__ = ["Device", "DeviceAttributes", "can_access_peer", "current_context", "current_context_cache_config",
           "current_context_handle", "current_context_limit", "current_device_memory_info", "current_device_ordinal",
           "describe", "device_attribute", "device_count", "device_name", "device_ordinal", "device_pci_bus_id",
           "device_total_memory", "devices", "driver_version", "open_device", "set_current_context_cache_config",
           "set_current_context_limit", "synchronize_current_context"]

CU_STREAM_DEFAULT = 0
CU_STREAM_NON_BLOCKING = 1
CU_MEMHOSTALLOC_PORTABLE = 1
CU_MEMHOSTALLOC_DEVICEMAP = 2
CU_MEMHOSTALLOC_WRITECOMBINED = 4


_CACHE_CONFIGS = {"prefer_none": 0, "prefer_shared": 1, "prefer_l1": 2, "prefer_equal": 3}
_GRAPH_MEMORY = ("used_mem_current", "used_mem_high", "reserved_mem_current", "reserved_mem_high")
_GRAPH_MEMORY_HIGHS = ("used_mem_high", "reserved_mem_high")
_CACHE_CONFIGS_BY_VALUE = {v: k for k, v in _CACHE_CONFIGS.items()}


def _enum_member(enum: Any, prefix: str, name: Any, op: str, what: str) -> Any:
    """The member of a cuda.bindings enum named `name`, with or without `prefix`, any case."""
    if not isinstance(name, str) or not name:
        raise invalid(op, f"a {what} name must be a non-empty str, got {name!r}")
    key = name.upper()
    if not key.startswith(prefix):
        key = prefix + key
    member = getattr(enum, key, None)
    if member is None or key.endswith("_MAX"):
        known = [n[len(prefix):].lower() for n in dir(enum) if n.startswith(prefix) and not n.endswith("_MAX")]
        close = difflib.get_close_matches(name.lower().removeprefix(prefix.lower()), known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise invalid(op, f"no {what} named {name!r}{hint}")
    return member


def _name(cudev: Any) -> str:
    raw = call("cuDeviceGetName", 256, cudev)
    return raw.split(b"\0", 1)[0].decode(errors="replace").strip()


def _pci_bus_id(cudev: Any) -> str:
    raw = call("cuDeviceGetPCIBusId", 64, cudev)
    return raw.split(b"\0", 1)[0].decode()


# -- queries by ordinal: no Device, no context ---------------------------------------
# For code that looks at devices before (or without) opening them: a Device retains the primary context and
# makes it current, which a device picker or another API's device object must not do.  The driver checks the
# ordinal: a bad one is its CUDA_ERROR_INVALID_DEVICE, naming the call.


def _ordinal_arg(ordinal: Any, op: str) -> int:
    if isinstance(ordinal, bool) or not isinstance(ordinal, (int, np.integer)):
        raise invalid(op, f"the device ordinal must be an int, got {ordinal!r}")
    if not -(1 << 31) <= int(ordinal) < 1 << 31:
        raise invalid(op, f"device ordinal {ordinal} is out of range")
    return int(ordinal)


def driver_version() -> int:
    """The CUDA version the installed driver supports, as the driver encodes it (cuDriverGetVersion): 1000 *
    major + 10 * minor, e.g. 13000 for CUDA 13.0.  Needs no device."""
    return int(call("cuDriverGetVersion"))


def device_ordinal(device: int | str) -> int:
    """The ordinal of a device named by ordinal (checked by the driver, cuDeviceGet) or by PCI bus id such as
    "0000:65:00.0" (cuDeviceGetByPCIBusId), without opening it."""
    if isinstance(device, str):
        return int(call("cuDeviceGetByPCIBusId", device.encode()))
    return int(call("cuDeviceGet", _ordinal_arg(device, "cuDeviceGet")))


def device_name(ordinal: int) -> str:
    """Device `ordinal`'s name as the driver reports it (cuDeviceGetName), without opening it."""
    return _name(_ordinal_arg(ordinal, "cuDeviceGetName"))


def device_pci_bus_id(ordinal: int) -> str:
    """Device `ordinal`'s PCI bus id (cuDeviceGetPCIBusId), e.g. "0000:65:00.0", without opening it."""
    return _pci_bus_id(_ordinal_arg(ordinal, "cuDeviceGetPCIBusId"))


def device_total_memory(ordinal: int) -> int:
    """Bytes of memory of device `ordinal` (cuDeviceTotalMem), without opening it."""
    return int(call("cuDeviceTotalMem", _ordinal_arg(ordinal, "cuDeviceTotalMem")))


def device_attribute(ordinal: int, attribute: str | int) -> int:
    """Any attribute of device `ordinal` (cuDeviceGetAttribute), without opening it: by name as
    `Device.attribute` takes it ("multiprocessor_count"), or by its `CUdevice_attribute` value."""
    op = "cuDeviceGetAttribute"
    cudev = _ordinal_arg(ordinal, op)
    enum = driver().CUdevice_attribute
    if isinstance(attribute, str):
        attr = _enum_member(enum, "CU_DEVICE_ATTRIBUTE_", attribute, op, "device attribute")
    elif isinstance(attribute, bool) or not hasattr(attribute, "__index__"):
        raise invalid(op, f"a device attribute is a name or a CUdevice_attribute value, got {attribute!r}")
    else:
        try:
            attr = enum(attribute.__index__())
        except ValueError:
            raise invalid(op, f"no device attribute {attribute!r}") from None
    return int(call(op, attr, cudev))


def can_access_peer(ordinal: int, peer: int) -> bool:
    """Whether kernels on device `ordinal` can reach device `peer`'s memory once peer access is enabled
    (cuDeviceCanAccessPeer; False for a device and itself), without opening either."""
    op = "cuDeviceCanAccessPeer"
    return bool(int(call(op, _ordinal_arg(ordinal, op), _ordinal_arg(peer, op))))


_DATACENTER = re.compile(
    r"\b(TESLA|H100|H200|H800|H20|A100|A800|A30|A40|A10|A16|A2|L40S?|L20|L4|B100|B200|B300|GB200|GB300|GH200|"
    r"V100|P100|P40|T4|K80)\b"
)
_WORKSTATION = re.compile(r"\b(QUADRO|RTX A\d+|RTX PRO|RTX \d000|TITAN)\b")


def _tier(name: str, attrs: DeviceAttributes) -> ComputeTier:
    upper = name.upper()
    if attrs.integrated:
        return ComputeTier.MOBILE if any(k in upper for k in ("ORIN", "XAVIER", "TEGRA", "THOR")) else (
            ComputeTier.CONSUMER)
    if _DATACENTER.search(upper):
        return ComputeTier.DATACENTER
    if _WORKSTATION.search(upper):
        return ComputeTier.WORKSTATION
    return ComputeTier.CONSUMER


def _capabilities(attrs: DeviceAttributes, peers: bool) -> CapabilityFlags:
    cc = attrs.compute_capability
    f = CapabilityFlags.FP64 | CapabilityFlags.GRAPHS | CapabilityFlags.SUBGROUPS | CapabilityFlags.TIMESTAMPS
    if cc >= (5, 3):
        f |= CapabilityFlags.FP16
    if cc >= (6, 1):
        f |= CapabilityFlags.INT8
    if cc >= (7, 0):
        f |= CapabilityFlags.MATRIX_UNITS
    if cc >= (8, 0):
        f |= CapabilityFlags.BF16
    for flag, on in (
        (CapabilityFlags.UNIFIED_ADDRESSING, attrs.unified_addressing),
        (CapabilityFlags.MANAGED_MEMORY, attrs.managed_memory),
        (CapabilityFlags.HOST_MAPPED_MEMORY, attrs.can_map_host_memory),
        (CapabilityFlags.MEMORY_POOLS, attrs.memory_pools_supported),
        (CapabilityFlags.COOPERATIVE_LAUNCH, attrs.cooperative_launch),
        (CapabilityFlags.ASYNC_COPY, attrs.async_engine_count > 0),
        (CapabilityFlags.PEER_ACCESS, peers),
        (CapabilityFlags.RUNTIME_COMPILE, _nvrtc_available()),
    ):
        if on:
            f |= flag
    return f


_nvrtc_ok: bool | None = None


def _nvrtc_available() -> bool:
    global _nvrtc_ok
    if _nvrtc_ok is None:
        try:
            nvrtc_version()
            _nvrtc_ok = True
        except Exception:
            _nvrtc_ok = False
    return _nvrtc_ok


def describe(ordinal: int) -> DeviceDescriptor:
    """The core DeviceDescriptor of device `ordinal` (no context is created)."""
    cudev = cudevice(ordinal)
    attrs = query_attributes(cudev)
    name = _name(cudev)
    total = int(call("cuDeviceTotalMem", cudev))
    count = device_count()
    peers = any(
        int(call("cuDeviceCanAccessPeer", cudev, call("cuDeviceGet", other)))
        for other in range(count) if other != ordinal
    )
    extras = {
        "compute_capability": f"{attrs.compute_capability[0]}.{attrs.compute_capability[1]}",
        "arch": f"sm_{attrs.compute_capability[0]}{attrs.compute_capability[1]}",
        "uuid": device_uuid(cudev),
        "pci_bus_id": _pci_bus_id(cudev),
        "multiprocessor_count": attrs.multiprocessor_count,
        "max_threads_per_block": attrs.max_threads_per_block,
        "max_shared_memory_per_block": attrs.max_shared_memory_per_block,
        "max_shared_memory_per_multiprocessor": attrs.max_shared_memory_per_multiprocessor,
        "warp_size": attrs.warp_size,
        "async_engine_count": attrs.async_engine_count,
        "l2_cache_size": attrs.l2_cache_size,
    }
    return DeviceDescriptor(
        backend="cuda", ordinal=int(ordinal), name=name, vendor=Vendor.NVIDIA, kind=DeviceKind.GPU,
        memory_bytes=total, compute_tier=_tier(name, attrs), capabilities=_capabilities(attrs, peers),
        extras=extras,
    )


def devices() -> list[DeviceDescriptor]:
    """Descriptors of every CUDA device."""
    return [describe(i) for i in range(device_count())]


def _dtype_spec(dtype: Any, op: str) -> tuple[DType, np.dtype]:
    """(DType, numpy dtype) for `dtype`, InvalidArgument naming `op` otherwise."""
    dt, npdt, _ = _dtypes.spec(dtype, op)
    return dt, npdt


_core.set_event_type(Event)


class Device(_core.DeviceCore, ComputeDeviceMixin):
    """An opened CUDA device (also the core `Device` and `ComputeDevice` protocols).

    alloc(size, dtype="uint8", stream=None) and create_event(timing=False) are
    the hot methods, inherited from `_core.DeviceCore`.
    """

    def __init__(self, ordinal: int = 0):
        if _driver_mod.forked:
            raise _driver_mod.fork_error("Device")
        st = state_for(ordinal, _complete)
        self._init(st)
        _core.ensure(st.ctx)

    @classmethod
    def _internal(cls, st: DeviceState) -> Device:
        dev = cls.__new__(cls)
        dev._init(st)
        return dev

    # -- identity and attributes -------------------------------------------

    @property
    def name(self) -> str:
        """The device's name as the driver reports it (cuDeviceGetName)."""
        return self.descriptor.name

    @property
    def uuid(self) -> str:
        """The device's UUID in nvidia-smi's form ("GPU-..."): its identity across processes and ordinal orders."""
        return self._state.uuid

    @property
    def pci_bus_id(self) -> str:
        """The PCI bus id (cuDeviceGetPCIBusId), e.g. "0000:65:00.0": which physical slot this ordinal is."""
        return str(self.descriptor.extras["pci_bus_id"])

    @property
    def compute_capability(self) -> tuple[int, int]:
        """(major, minor) compute capability, e.g. (9, 0) for an H100 or H200."""
        return self._state.attributes.compute_capability

    @property
    def arch(self) -> str:
        """The NVRTC architecture of this device, e.g. "sm_90"."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    @property
    def attributes(self) -> DeviceAttributes:
        """What a dispatcher needs to know of the device (compute capability, limits, memory features), read once."""
        return self._state.attributes

    @property
    def descriptor(self) -> DeviceDescriptor:
        """The device as the core `DeviceDescriptor` (name, memory, versions, extras such as the PCI bus id), cached."""
        st = self._state
        if st.descriptor_cache is None:
            st.descriptor_cache = describe(self.ordinal)
        return st.descriptor_cache  # type: ignore[no-any-return]

    @property
    def total_memory(self) -> int:
        """Bytes of device memory (cuDeviceTotalMem); allocations past it are refused before the driver is asked."""
        return self._state.total_memory

    def memory_info(self) -> tuple[int, int]:
        """(free, total) bytes of device memory, from cuMemGetInfo."""
        self._check_open("cuMemGetInfo")
        self._bind_here()
        free, total = call("cuMemGetInfo")
        return int(free), int(total)

    def pool_usage(self) -> tuple[int, int]:
        """(used, reserved) bytes of the device's stream-ordered pool (what cuMemAllocAsync draws from)."""
        self._check_open("cuMemPoolGetAttribute")
        drv = driver()
        pool = call("cuDeviceGetDefaultMemPool", self._state.cudev)
        attr = drv.CUmemPool_attribute
        used = call("cuMemPoolGetAttribute", pool, attr.CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
        reserved = call("cuMemPoolGetAttribute", pool, attr.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
        return int(used), int(reserved)

    def graph_memory(self, name: str) -> int:
        """Bytes of graph memory -- what graphs' allocation nodes use -- on this device
        (cuDeviceGetGraphMemAttribute): "used_mem_current", "used_mem_high", "reserved_mem_current" or
        "reserved_mem_high" (reserved: held by the driver, in use or cached for the next launch)."""
        op = "cuDeviceGetGraphMemAttribute"
        self._check_open(op)
        attr = self._graph_mem_attribute(name, _GRAPH_MEMORY, op)
        return int(call(op, self._state.cudev, attr))

    def reset_graph_memory_high(self, name: str) -> None:
        """Reset the high-water mark "used_mem_high" or "reserved_mem_high" of `graph_memory` to the current
        usage (cuDeviceSetGraphMemAttribute)."""
        op = "cuDeviceSetGraphMemAttribute"
        self._check_open(op)
        attr = self._graph_mem_attribute(name, _GRAPH_MEMORY_HIGHS, op)
        call(op, self._state.cudev, attr, driver().cuuint64_t(0))

    def trim_graph_memory(self) -> None:
        """Give the graph memory this device caches and no graph uses back to the system (cuDeviceGraphMemTrim)."""
        op = "cuDeviceGraphMemTrim"
        self._check_open(op)
        call(op, self._state.cudev)

    @staticmethod
    def _graph_mem_attribute(name: Any, names: tuple[str, ...], op: str) -> Any:
        if not isinstance(name, str) or name not in names:
            raise invalid(op, f"name must be one of {list(names)}, got {name!r}")
        return getattr(driver().CUgraphMem_attribute, "CU_GRAPH_MEM_ATTR_" + name.upper())

    # -- context --------------------------------------------------------------

    def bind(self) -> None:
        """Make this device's context current on the calling thread."""
        self._check_open("cuCtxSetCurrent")
        _core.bind(self._state.ctx)

    def _bind_here(self) -> None:
        _core.ensure(self._state.ctx)

    def synchronize(self) -> None:
        """Wait for all work on this device (cuCtxSynchronize)."""
        self._check_open("cuCtxSynchronize")
        self._bind_here()
        call("cuCtxSynchronize")

    # -- peers ----------------------------------------------------------------

    def can_access_peer(self, other: Device | int) -> bool:
        """True if kernels on this device can access `other`'s memory (always True for itself)."""
        peer = self._peer(other, "cuDeviceCanAccessPeer")
        return self._state.can_access(peer._state)

    def enable_peer_access(self, other: Device | int) -> None:
        """Let kernels and copies on this device access `other`'s memory directly.  Idempotent."""
        op = "cuCtxEnablePeerAccess"
        peer = self._peer(other, op)
        if peer.ordinal == self.ordinal:
            return
        if not self.can_access_peer(peer):
            raise invalid(op, f"cuda:{self.ordinal} cannot access cuda:{peer.ordinal} (no peer path)")
        self._bind_here()
        err, _ = try_call(op, peer._state.ctx, 0)
        if err not in (0, 704):  # CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED is fine
            raise driver_error(err, op)
        if peer.attributes.memory_pools_supported:
            # Stream-ordered memory (cuMemAllocAsync, MemPool) comes from the peer's pool, which
            # cuCtxEnablePeerAccess does not open: without this a kernel here faults on it.
            drv = driver()
            desc = drv.CUmemAccessDesc()
            desc.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            desc.location.id = self.ordinal
            desc.flags = drv.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
            call("cuMemPoolSetAccess", call("cuDeviceGetDefaultMemPool", peer._state.cudev), [desc], 1)
        self._state.reachable.add(peer.ordinal)

    def disable_peer_access(self, other: Device | int) -> None:
        """Undo `enable_peer_access(other)`: kernels here may no longer use `other`'s memory (cuCtxDisablePeerAccess).

        InvalidArgument (CUDA_ERROR_PEER_ACCESS_NOT_ENABLED) when access was not enabled, and for this device
        itself, whose own memory is always accessible.
        """
        op = "cuCtxDisablePeerAccess"
        peer = self._peer(other, op)
        if peer.ordinal == self.ordinal:
            raise invalid(op, f"cuda:{self.ordinal} always accesses its own memory: there is no peer access to disable")
        self._bind_here()
        err, _ = try_call(op, peer._state.ctx)
        if err == 705:  # CUDA_ERROR_PEER_ACCESS_NOT_ENABLED: whoever enabled it, the driver says it is off now
            self._state.reachable.discard(peer.ordinal)
            raise driver_error(err, op, f"cuda:{self.ordinal} has no peer access to cuda:{peer.ordinal} to disable")
        if err:
            raise driver_error(err, op)
        self._state.reachable.discard(peer.ordinal)
        if peer.attributes.memory_pools_supported:
            # enable_peer_access opened the peer's stream-ordered pool to this device: close it again.
            drv = driver()
            desc = drv.CUmemAccessDesc()
            desc.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            desc.location.id = self.ordinal
            desc.flags = drv.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_NONE
            call("cuMemPoolSetAccess", call("cuDeviceGetDefaultMemPool", peer._state.cudev), [desc], 1)

    def _peer(self, other: Any, op: str) -> Device:
        self._check_open(op)
        if isinstance(other, Device):
            return other
        return Device(other)

    # -- streams and events ------------------------------------------------

    @property
    def default_stream(self) -> Stream:
        """The device's permanent stream (blocking: ordered with the legacy default stream)."""
        return self._state.default_stream

    def _blocking_sync_event(self, timing: bool, blocking_sync: Any) -> Event:
        """`create_event(blocking_sync=...)` off its hot path: the compiled `create_event` calls this for any
        `blocking_sync` but False."""
        if blocking_sync is not True:
            raise invalid("cuEventCreate", f"blocking_sync must be a bool, got {blocking_sync!r}")
        flags = CU_EVENT_BLOCKING_SYNC | (0 if timing else CU_EVENT_DISABLE_TIMING)
        event: Event = self._event_of(Event, flags)
        event._blocking = True
        return event

    def create_stream(self, priority: int = 0, non_blocking: bool = True) -> Stream:
        """A new owned stream; lower `priority` numbers run first (see cuCtxGetStreamPriorityRange)."""
        op = "cuStreamCreateWithPriority"
        self._check_open(op)
        check_priority(op, priority)
        self._bind_here()
        flags = CU_STREAM_NON_BLOCKING if non_blocking else CU_STREAM_DEFAULT
        h = call(op, flags, priority)
        return Stream._make(h, self, owned=True, priority=priority, non_blocking=non_blocking)

    # -- memory -------------------------------------------------------------

    def alloc_pinned(self, size: int, dtype: Any = "uint8", *, mapped: bool = False, write_combined: bool = False,
                     portable: bool = True) -> PinnedBuf:
        """`size` elements of page-locked host memory (cuMemHostAlloc).

        `mapped`: the device can address it too (`device_view(p.array)`);
        `write_combined`: faster for the host to write and the device to read,
        very slow for the host to read; `portable`: page-locked for every
        context, not only this device's.
        """
        op = "cuMemHostAlloc"
        self._check_open(op)
        dt, npdt = _dtype_spec(dtype, op)
        size = self._size_arg(size, op)
        nbytes = size * npdt.itemsize
        if nbytes <= 0 or nbytes > 1 << 46:
            raise self._bad_size(size, nbytes, op)
        for name, value in (("mapped", mapped), ("write_combined", write_combined), ("portable", portable)):
            if not isinstance(value, bool):
                raise invalid(op, f"{name} must be a bool, got {value!r}")
        if mapped and not self.attributes.can_map_host_memory:
            raise Unsupported("cuda", op, f"cuda:{self.ordinal} cannot map host memory")
        flags = ((CU_MEMHOSTALLOC_PORTABLE if portable else 0) | (CU_MEMHOSTALLOC_DEVICEMAP if mapped else 0)
                 | (CU_MEMHOSTALLOC_WRITECOMBINED if write_combined else 0))
        self._bind_here()
        ptr = int(call(op, nbytes, flags))
        return PinnedBuf._make(ptr, size, dt, self, flags=flags)

    def device_view(self, array: np.ndarray) -> Any:
        """A DeviceBuf aliasing mapped page-locked host memory (no copy; kernels reach the host over the bus).

        `array` is (part of) `alloc_pinned(..., mapped=True).array` or an array
        registered with `pinned(array, mapped=True)`; the view keeps `array`
        alive, but the memory goes when the PinnedBuf is closed or the
        registration ends.
        """
        op = "cuMemHostGetDevicePointer"
        self._check_open(op)
        if not isinstance(array, np.ndarray):
            raise invalid(op, f"expected a numpy array, got {type(array).__name__}")
        if not array.flags.c_contiguous or array.nbytes == 0:
            raise invalid(op, "the array must be C-contiguous and non-empty")
        self._bind_here()
        err, dptr = try_call(op, array.ctypes.data, 0)
        if err:
            raise driver_error(err, op, "the array is not mapped page-locked memory: allocate it with "
                               "alloc_pinned(..., mapped=True) or register it with pinned(array, mapped=True)")
        return adopt(int(dptr), array.size, array.dtype, self, keepalive=array)

    @property
    def default_pool(self) -> Any:
        """The device's default stream-ordered pool as a DriverPool (what `alloc` draws from); never destroyed."""
        self._check_open("cuDeviceGetDefaultMemPool")
        st = self._state
        if st.default_pool is None:
            if not st.pools:
                raise Unsupported("cuda", "cuDeviceGetDefaultMemPool", f"cuda:{self.ordinal} has no memory pools")
            with st.lock:
                if st.default_pool is None:
                    st.default_pool = DriverPool._default(st.device)
        return st.default_pool

    def create_driver_pool(self, *, host: bool = False, ipc: bool = False, max_size: int = 0,
                           release_threshold: int | None = None, managed: bool = False,
                           location: tuple[str, int] | None = None) -> Any:
        """A driver memory pool of its own (cuMemPoolCreate); see `driver_pool.DriverPool`.

        `host=True`: page-locked host memory this device can use; `managed=True`:
        managed memory; `ipc=True`: exportable to other processes (`ipc.export`);
        `max_size`: a cap in bytes (0: none); `release_threshold`: bytes kept
        after synchronize (default: the driver's 0); `location`: a host pool's
        NUMA node `("host_numa", n)` or a managed pool's preferred location.
        Closed with this Device handle.
        """
        self._check_open("cuMemPoolCreate")
        pool = DriverPool._create(self, host=host, ipc=ipc, max_size=max_size, release_threshold=release_threshold,
                                  managed=managed, location=location)
        self._pools.append(pool)
        return pool

    def reserve(self, capacity: int, *, exportable: bool = False, granularity: str = "minimum",
                gpu_direct_rdma: bool = False, self_access: str = "readwrite") -> Any:
        """A growable VirtualBuffer of up to `capacity` bytes at one fixed address; see `vmm`.

        Its physical chunks are exportable as POSIX file descriptors when `exportable`, sized to the device's
        "minimum" or "recommended" `granularity`, GPUDirect RDMA capable with `gpu_direct_rdma`, and mapped
        "readwrite" or "read" for this device (`self_access`).
        """
        return VirtualBuffer._create(self, capacity, exportable=exportable, granularity=granularity,
                                     gpu_direct_rdma=gpu_direct_rdma, self_access=self_access)

    def alloc_pitched(self, shape: tuple[int, ...], dtype: Any = "uint8", stream: Stream | None = None) -> Any:
        """A (rows, cols) or (depth, rows, cols) PitchedBuf with rows padded by the driver; see `pitched`."""
        return PitchedBuf._alloc(self, shape, dtype, stream)

    def create_array(self, shape: tuple[int, ...], dtype: Any = "float32", channels: int = 1, *, surface: bool = False,
                     layered: bool = False, cubemap: bool = False, texture_gather: bool = False,
                     stream: Stream | None = None) -> Array:
        """A CUDA array (cuArray3DCreate) of `shape` -- (width,), (height, width) or (depth, height, width) -- with
        `channels` (1, 2 or 4) values of `dtype` per texel, for textures and surfaces; see `arrays`.

        `surface`: surface objects may load and store it; `layered`: the first axis counts layers; `cubemap`:
        (6, width, width) faces; `texture_gather`: a 2-D array for tex2Dgather.  `stream` is its home stream
        (default: the default stream): synchronous copies run there and closing waits for it.
        """
        return Array._create(self, shape, dtype, channels, surface=surface, layered=layered, cubemap=cubemap,
                             texture_gather=texture_gather, stream=stream)

    def create_texture(self, resource: Any, *, address_mode: Any = "clamp", filter_mode: str = "point",
                       read_mode: str = "element", normalized_coords: bool = False, border_color: Any = 0.0,
                       channels: int | None = None) -> TextureObject:
        """A texture object (cuTexObjectCreate) reading an Array, a DeviceBuf (tex1Dfetch) or a 2-D PitchedBuf.

        `address_mode`: "clamp", "border", "wrap" or "mirror" (the last two need `normalized_coords`), for every
        dimension or per dimension (x, y, z); `filter_mode`: "point" or "linear"; `read_mode`: "element" or
        "normalized_float" (8- and 16-bit integers read as [0, 1] or [-1, 1]); `border_color`: what "border"
        reads outside, one number or (r, g, b, a); `channels`: values per texel of a DeviceBuf or PitchedBuf
        (an Array knows its own).  See `arrays`.
        """
        return TextureObject._create(self, resource, address_mode=address_mode, filter_mode=filter_mode,
                                     read_mode=read_mode, normalized_coords=normalized_coords,
                                     border_color=border_color, channels=channels)

    def create_surface(self, array: Array) -> SurfaceObject:
        """A surface object (cuSurfObjectCreate) loading and storing an Array made with `surface=True`."""
        return SurfaceObject._create(self, array)

    def create_pool(self, stream: Stream | None = None, *, max_block: int = 1 << 26, max_bytes: int = 1 << 32,
                    front_depth: int = 32, min_block: int = 256) -> Any:
        """A MemPool of power-of-two buckets on `stream` (default: the default stream); see `MemPool`."""
        self._check_open("MemPool")
        pool = MemPool(self, stream, max_block=max_block, max_bytes=max_bytes, front_depth=front_depth,
                       min_block=min_block)
        self._pools.append(pool)
        return pool

    @property
    def legacy_stream(self) -> Stream:
        """The legacy default stream (CU_STREAM_LEGACY) of this device's primary context, as a Stream.

        Its handle means "the current context's", so each call on it first makes
        this device current on the calling thread.  Closing it does nothing.
        """
        return self._implicit_stream("legacy", CU_STREAM_LEGACY)

    @property
    def per_thread_stream(self) -> Stream:
        """The per-thread default stream (CU_STREAM_PER_THREAD) of this device, for the calling thread."""
        return self._implicit_stream("per_thread", CU_STREAM_PER_THREAD)

    def _implicit_stream(self, kind: str, handle: int) -> Stream:
        self._check_open(f"Device.{kind}_stream")
        st = self._state
        with st.lock:
            found = st.__dict__.get(kind)
            if found is None:
                found = st.__dict__[kind] = implicit_stream(st.device, handle)
        return found

    @property
    def stream_priority_range(self) -> tuple[int, int]:
        """(least, greatest) meaningful stream priority (cuCtxGetStreamPriorityRange); greatest is the lowest number."""
        op = "cuCtxGetStreamPriorityRange"
        self._check_open(op)
        self._bind_here()
        least, greatest = call(op)
        return int(least), int(greatest)

    # -- any attribute, limits, cache configuration ---------------------------

    def attribute(self, name: str) -> int:
        """Any device attribute by name: "MULTIPROCESSOR_COUNT", "multiprocessor_count" or
        "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT" (cuDeviceGetAttribute)."""
        op = "cuDeviceGetAttribute"
        self._check_open(op)
        attr = _enum_member(driver().CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_", name, op, "device attribute")
        return int(call(op, attr, self._state.cudev))

    def limit(self, name: str) -> int:
        """A limit of this device's primary context (cuCtxGetLimit): "stack_size", "printf_fifo_size",
        "malloc_heap_size", "dev_runtime_sync_depth", "dev_runtime_pending_launch_count",
        "max_l2_fetch_granularity", "persisting_l2_cache_size", ..."""
        op = "cuCtxGetLimit"
        self._check_open(op)
        attr = _limit(name, op)
        self._bind_here()
        return int(call(op, attr))

    def set_limit(self, name: str, value: int) -> None:
        """Set a limit of this device's primary context (cuCtxSetLimit); the driver may round it."""
        op = "cuCtxSetLimit"
        self._check_open(op)
        attr, value = _limit(name, op), _limit_value(value, op)
        self._bind_here()
        call(op, attr, value)

    @property
    def cache_config(self) -> str:
        """The primary context's L1/shared-memory preference: "prefer_none", "prefer_shared", "prefer_l1"
        or "prefer_equal" (cuCtxGetCacheConfig)."""
        op = "cuCtxGetCacheConfig"
        self._check_open(op)
        self._bind_here()
        return _CACHE_CONFIGS_BY_VALUE[int(call(op))]

    def set_cache_config(self, config: str) -> None:
        """Prefer L1 or shared memory for kernels of the primary context (cuCtxSetCacheConfig)."""
        op = "cuCtxSetCacheConfig"
        self._check_open(op)
        value = _cache_config(config, op)
        self._bind_here()
        call(op, value)

    # -- contexts -------------------------------------------------------------

    def create_context(self, sched: str = "auto", map_host: bool = False) -> Any:
        """A new explicit (non-primary) Context of this device, not made current (see `context`).

        `sched` is how a waiting host thread waits: "auto", "spin", "yield" or "blocking_sync".
        """
        self._check_open("cuCtxCreate")
        return Context._create(self, sched, map_host)

    def split_sms(self, sm_count: int, groups: int | None = None, *, coscheduling: bool = True) -> list[Any]:
        """Green contexts over disjoint groups of at least `sm_count` SMs each (see `context.split_sms`)."""
        self._check_open("cuDevSmResourceSplitByCount")
        return split_sms(self, sm_count, groups, coscheduling=coscheduling)

    # -- modules ------------------------------------------------------------

    def load_module(self, code: Any) -> Any:
        """Load an ObjectCode, CUBIN/PTX/fatbin bytes, or a file path (str or Path) into this device."""
        self._check_open("cuModuleLoadData")
        return load_module(self, code)

    # -- lifetime -----------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether `close()` retired this handle (later calls on it raise ClosedError)."""
        return self._closed

    def close(self) -> None:
        """Retire this handle: later calls on it raise ClosedError; its pools are closed.  Idempotent.

        The primary context, the default stream, and memory still held by
        buffers are unaffected (buffers free themselves when closed).
        """
        if self._closed:
            return
        self._closed = True
        pools, self._pools = self._pools, []
        for pool in pools:
            pool.close()

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Device cuda:{self.ordinal}{' closed' if self._closed else ''}>"

    # -- cold helpers -------------------------------------------------------

    def _check_open(self, op: str) -> None:
        if self._closed:
            raise closed(op, "device")

    @staticmethod
    def _size_arg(size: Any, op: str) -> int:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
            raise invalid(op, f"size must be a positive int (elements), got {size!r}")
        return int(size)

    def _bad_size(self, size: int, nbytes: int, op: str) -> InvalidArgument:
        if nbytes <= 0:
            return invalid(op, f"size must be positive, got {size}")
        return invalid(op, f"{nbytes} bytes is more than cuda:{self.ordinal} has ({self._state.total_memory})")

    def _bad_stream(self, s: Any, op: str) -> Exception:
        if not isinstance(s, Stream):
            return invalid(op, f"stream must be a Stream, got {type(s).__name__}")
        if s._h is _core.CLOSED:
            return closed(op, "stream")
        return invalid(op, f"the stream is on cuda:{s._ordinal}, not cuda:{self.ordinal}")


def _complete(st: DeviceState) -> None:
    """Give a new device state its own Device handle and its permanent default stream (see `_devices`)."""
    device = Device._internal(st)
    _core.ensure(st.ctx)
    h = call("cuStreamCreateWithPriority", CU_STREAM_DEFAULT, 0)
    st.default_stream = Stream._make(h, device, owned=True, permanent=True)
    st.device = device  # last: another thread takes a state with a device as complete


def current_context_handle() -> int:
    """The address of the CUcontext current on the calling thread, 0 for none (cuCtxGetCurrent): whoever made it
    current, ironaccel or another library (`current_context` finds ironaccel's own object for it)."""
    ctx = call("cuCtxGetCurrent")
    return int(ctx) if ctx is not None else 0


def current_device_ordinal() -> int | None:
    """The ordinal of the device of the calling thread's current context, None when no context is current
    (cuCtxGetDevice; its CUDA_ERROR_INVALID_CONTEXT).  Opens nothing."""
    op = "cuCtxGetDevice"
    err, dev = try_call(op)
    if err == 201:  # CUDA_ERROR_INVALID_CONTEXT: no context is current
        return None
    if err:
        raise driver_error(err, op)
    return int(dev)


def current_device_memory_info() -> tuple[int, int]:
    """(free, total) bytes of the device of the calling thread's current context, whoever made it current
    (cuMemGetInfo): `Device.memory_info` without making the device's primary context current."""
    free, total = call("cuMemGetInfo")
    return int(free), int(total)


def synchronize_current_context() -> None:
    """Wait for all work of the context current on the calling thread, whoever made it current (cuCtxSynchronize):
    for code that keeps its own contexts.  `Device.synchronize` and `Context.synchronize` name theirs."""
    call("cuCtxSynchronize")


def _limit(name: Any, op: str) -> Any:
    return _enum_member(driver().CUlimit, "CU_LIMIT_", name, op, "context limit")


def _limit_value(value: Any, op: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 63:
        raise invalid(op, f"a limit is a non-negative int, got {value!r}")
    return value


def _cache_config(config: Any, op: str) -> Any:
    if not isinstance(config, str) or config not in _CACHE_CONFIGS:
        raise invalid(op, f"config must be one of {sorted(_CACHE_CONFIGS)}, got {config!r}")
    return driver().CUfunc_cache(_CACHE_CONFIGS[config])


# The calling thread's current context, whoever made it current (another library, or code that keeps contexts
# of its own): what `Device.limit` and `Device.cache_config` are for a device's primary context.


def current_context_limit(name: str) -> int:
    """A limit of the context current on the calling thread (cuCtxGetLimit), named as `Device.limit` takes it."""
    op = "cuCtxGetLimit"
    return int(call(op, _limit(name, op)))


def set_current_context_limit(name: str, value: int) -> None:
    """Set a limit of the context current on the calling thread (cuCtxSetLimit); the driver may round it."""
    op = "cuCtxSetLimit"
    call(op, _limit(name, op), _limit_value(value, op))


def current_context_cache_config() -> str:
    """The L1/shared-memory preference of the context current on the calling thread (cuCtxGetCacheConfig), as
    `Device.cache_config` names it."""
    return _CACHE_CONFIGS_BY_VALUE[int(call("cuCtxGetCacheConfig"))]


def set_current_context_cache_config(config: str) -> None:
    """Prefer L1 or shared memory for kernels of the context current on the calling thread (cuCtxSetCacheConfig):
    "prefer_none", "prefer_shared", "prefer_l1" or "prefer_equal"."""
    op = "cuCtxSetCacheConfig"
    call(op, _cache_config(config, op))


def current_context() -> Any:
    """The Context, GreenContext or Device (primary context) current on this thread, or None."""
    ctx = call("cuCtxGetCurrent")
    address = int(ctx) if ctx is not None else 0
    if not address:
        return None
    found = context_at(address)
    if found is not None:
        return found
    for st in list(states.values()):
        if int(st.ctx) == address:
            return state_for(st.ordinal, _complete).device
    return None
