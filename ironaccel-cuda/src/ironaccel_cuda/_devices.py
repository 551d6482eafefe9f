"""Per-device state, shared by every handle of one ordinal, and the checks products make of a device.

This is the bottom of the package's layers (it imports only `_core`, `_driver`, `errors` and numpy):
every module that holds or checks a device goes through it, and `device.py` -- the `Device` facade, which
imports its products -- sits on top.  No product imports the facade.

A `DeviceState` holds what the driver gives once per process and ordinal: the retained primary context, the
`CUdevice`, the attributes, the set of devices whose memory kernels here may use.  Products that take a
device ordinal work with the state; the facade gives a state its `Device` handle and permanent default
stream when the first `Device` of that ordinal is made (`device.py`), so a state reached through a Device
always has both.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from . import _core
from ._driver import call, driver
from .errors import closed, invalid

__all__ = ["DeviceAttributes", "DeviceState", "ENV_RELEASE_THRESHOLD", "MAX_THRESHOLD", "apply_default_threshold",
           "attribute", "cudevice", "device_count", "open_device", "parse_threshold", "query_attributes",
           "state_for", "state_of", "states"]


@dataclass(frozen=True)
class DeviceAttributes:
    """The device attributes a dispatcher needs (from cuDeviceGetAttribute)."""

    compute_capability: tuple[int, int]
    multiprocessor_count: int
    max_threads_per_block: int
    max_threads_per_multiprocessor: int
    max_block_dim: tuple[int, int, int]
    max_grid_dim: tuple[int, int, int]
    max_shared_memory_per_block: int
    max_shared_memory_per_block_optin: int
    max_shared_memory_per_multiprocessor: int
    max_registers_per_block: int
    warp_size: int
    l2_cache_size: int
    async_engine_count: int
    memory_pools_supported: bool
    unified_addressing: bool
    managed_memory: bool
    concurrent_managed_access: bool
    can_map_host_memory: bool
    cooperative_launch: bool
    integrated: bool
    pci_domain_bus_device: tuple[int, int, int]

    def to_dict(self) -> dict[str, Any]:
        """The attributes as a plain dict (JSON-ready, for reports and probe facts)."""
        return asdict(self)


_ATTRS = {
    "cc_major": "COMPUTE_CAPABILITY_MAJOR",
    "cc_minor": "COMPUTE_CAPABILITY_MINOR",
    "multiprocessor_count": "MULTIPROCESSOR_COUNT",
    "max_threads_per_block": "MAX_THREADS_PER_BLOCK",
    "max_threads_per_multiprocessor": "MAX_THREADS_PER_MULTIPROCESSOR",
    "bx": "MAX_BLOCK_DIM_X",
    "by": "MAX_BLOCK_DIM_Y",
    "bz": "MAX_BLOCK_DIM_Z",
    "gx": "MAX_GRID_DIM_X",
    "gy": "MAX_GRID_DIM_Y",
    "gz": "MAX_GRID_DIM_Z",
    "max_shared_memory_per_block": "MAX_SHARED_MEMORY_PER_BLOCK",
    "max_shared_memory_per_block_optin": "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
    "max_shared_memory_per_multiprocessor": "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
    "max_registers_per_block": "MAX_REGISTERS_PER_BLOCK",
    "warp_size": "WARP_SIZE",
    "l2_cache_size": "L2_CACHE_SIZE",
    "async_engine_count": "ASYNC_ENGINE_COUNT",
    "memory_pools_supported": "MEMORY_POOLS_SUPPORTED",
    "unified_addressing": "UNIFIED_ADDRESSING",
    "managed_memory": "MANAGED_MEMORY",
    "concurrent_managed_access": "CONCURRENT_MANAGED_ACCESS",
    "can_map_host_memory": "CAN_MAP_HOST_MEMORY",
    "cooperative_launch": "COOPERATIVE_LAUNCH",
    "integrated": "INTEGRATED",
    "pci_domain": "PCI_DOMAIN_ID",
    "pci_bus": "PCI_BUS_ID",
    "pci_device": "PCI_DEVICE_ID",
}


def query_attributes(cudev: Any) -> DeviceAttributes:
    """All of `DeviceAttributes` for a CUdevice (no context needed)."""
    enum = driver().CUdevice_attribute
    v = {key: int(call("cuDeviceGetAttribute", getattr(enum, "CU_DEVICE_ATTRIBUTE_" + name), cudev))
         for key, name in _ATTRS.items()}
    return DeviceAttributes(
        compute_capability=(v["cc_major"], v["cc_minor"]),
        multiprocessor_count=v["multiprocessor_count"],
        max_threads_per_block=v["max_threads_per_block"],
        max_threads_per_multiprocessor=v["max_threads_per_multiprocessor"],
        max_block_dim=(v["bx"], v["by"], v["bz"]),
        max_grid_dim=(v["gx"], v["gy"], v["gz"]),
        max_shared_memory_per_block=v["max_shared_memory_per_block"],
        max_shared_memory_per_block_optin=v["max_shared_memory_per_block_optin"],
        max_shared_memory_per_multiprocessor=v["max_shared_memory_per_multiprocessor"],
        max_registers_per_block=v["max_registers_per_block"],
        warp_size=v["warp_size"],
        l2_cache_size=v["l2_cache_size"],
        async_engine_count=v["async_engine_count"],
        memory_pools_supported=bool(v["memory_pools_supported"]),
        unified_addressing=bool(v["unified_addressing"]),
        managed_memory=bool(v["managed_memory"]),
        concurrent_managed_access=bool(v["concurrent_managed_access"]),
        can_map_host_memory=bool(v["can_map_host_memory"]),
        cooperative_launch=bool(v["cooperative_launch"]),
        integrated=bool(v["integrated"]),
        pci_domain_bus_device=(v["pci_domain"], v["pci_bus"], v["pci_device"]),
    )


def attribute(cudev: Any, name: str) -> int:
    """cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_<name>) of a CUdevice; 0 when the binding lacks the attribute."""
    attr = getattr(driver().CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_" + name, None)
    if attr is None:
        return 0
    return int(call("cuDeviceGetAttribute", attr, cudev))


def device_count() -> int:
    """Number of CUDA devices (NotAvailable without a driver or GPU)."""
    return int(call("cuDeviceGetCount"))


def cudevice(ordinal: Any, op: str = "cuDeviceGet") -> Any:
    """The CUdevice of `ordinal`; InvalidArgument naming `op` for a non-int or an ordinal out of range."""
    if isinstance(ordinal, bool) or not isinstance(ordinal, (int, np.integer)):
        raise invalid(op, f"the device ordinal must be an int, got {ordinal!r}")
    count = device_count()
    if not 0 <= int(ordinal) < count:
        raise invalid(op, f"device ordinal {ordinal} is out of range: {count} CUDA device(s) here")
    return call("cuDeviceGet", int(ordinal))


def device_uuid(cudev: Any) -> str:
    """The device's UUID in nvidia-smi's form, "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"."""
    raw = call("cuDeviceGetUuid", cudev).bytes
    b = raw if isinstance(raw, bytes) else bytes(ord(c) & 0xFF for c in raw)
    h = b.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


# -- the default pool's release threshold --------------------------------------------

ENV_RELEASE_THRESHOLD = "IRONACCEL_CUDA_POOL_RELEASE_THRESHOLD"
MAX_THRESHOLD = (1 << 64) - 1
_UNITS = {"": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30,
          "t": 1 << 40, "tib": 1 << 40}


def parse_threshold(text: str) -> int | None:
    """The release threshold a setting names: None for "keep", 2**64-1 for "max", else bytes."""
    value = text.strip().lower()
    if value in ("", "max"):
        return MAX_THRESHOLD
    if value == "keep":
        return None
    match = re.fullmatch(r"(\d+)\s*([a-z]*)", value)
    if match is None or match.group(2) not in _UNITS:
        raise invalid(ENV_RELEASE_THRESHOLD, f"expected 'max', 'keep' or a byte count such as 8GiB, got {text!r}")
    n = int(match.group(1)) * _UNITS[match.group(2)]
    if n > MAX_THRESHOLD:
        raise invalid(ENV_RELEASE_THRESHOLD, f"{text!r} is more than 2**64-1 bytes")
    return n


def apply_default_threshold(cudev: Any) -> None:
    """At a device's first open: set its default pool's release threshold as the environment says."""
    wanted = parse_threshold(os.environ.get(ENV_RELEASE_THRESHOLD, ""))
    if wanted is None:
        return
    pool = call("cuDeviceGetDefaultMemPool", cudev)
    attr = driver().CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
    if ENV_RELEASE_THRESHOLD not in os.environ and int(call("cuMemPoolGetAttribute", pool, attr)) >= wanted:
        return
    call("cuMemPoolSetAttribute", pool, attr, driver().cuuint64_t(wanted))


# -- states ----------------------------------------------------------------------------


class DeviceState:
    """What every Device handle of one ordinal shares: primary context, attributes, reachable peers.

    `device` (the state's own Device handle) and `default_stream` (the permanent stream) are given by the
    facade when the first Device of this ordinal is made; until then they are None.
    """

    def __init__(self, ordinal: int):
        self.ordinal = ordinal
        self.cudev = cudevice(ordinal, "Device")
        self.ctx = call("cuDevicePrimaryCtxRetain", self.cudev)
        _core.bind(self.ctx)
        self.attributes = query_attributes(self.cudev)
        self.total_memory = int(call("cuDeviceTotalMem", self.cudev))
        self.pools = self.attributes.memory_pools_supported
        self.default_pool: Any = None  # the DriverPool object of the device's default pool, made on first use
        if self.pools:
            apply_default_threshold(self.cudev)
        self.reachable = {ordinal}  # devices whose memory kernels here may use (self + enabled peers)
        self.lock = threading.Lock()
        self.device: Any = None
        self.default_stream: Any = None
        self.descriptor_cache: Any = None
        self._uuid: str | None = None

    @property
    def uuid(self) -> str:
        if self._uuid is None:  # kept: an IPC open compares it every time
            self._uuid = device_uuid(self.cudev)
        return self._uuid

    def can_access(self, other: DeviceState) -> bool:
        """True if kernels on this device can access `other`'s memory (always for itself)."""
        if other.ordinal == self.ordinal:
            return True
        return bool(int(call("cuDeviceCanAccessPeer", self.cudev, other.cudev)))


states: dict[int, DeviceState] = {}
_states_lock = threading.Lock()


def state_for(ordinal: Any, complete: Callable[[DeviceState], None] | None = None) -> DeviceState:
    """The state of device `ordinal`, made (primary context retained and made current here) on first use.

    `complete(state)` runs once, under the state's lock, while the state has no Device handle yet: the
    facade gives it its handle and default stream there.
    """
    if ordinal.__class__ is int:
        st = states.get(ordinal)
    elif isinstance(ordinal, np.integer) and not isinstance(ordinal, np.bool_):
        ordinal = int(ordinal)
        st = states.get(ordinal)
    else:
        raise invalid("Device", f"the device ordinal must be an int, got {ordinal!r}")
    if st is None:
        with _states_lock:
            st = states.get(ordinal)
            if st is None:
                st = DeviceState(ordinal)
                states[ordinal] = st
    if complete is not None and st.device is None:
        with st.lock:
            if st.device is None:
                complete(st)
    return st


def open_device(device: Any, op: str) -> Any:
    """`device` if it is an open Device: InvalidArgument for anything else, ClosedError once it is closed."""
    if not isinstance(device, _core.DeviceCore):
        raise invalid(op, f"device must be a Device, got {type(device).__name__}")
    if device._closed:
        raise closed(op, "device")
    return device


def state_of(where: Any, op: str, what: str = "device") -> DeviceState:
    """The state of a Device (checked open) or of a device ordinal; InvalidArgument naming `what` otherwise."""
    if isinstance(where, _core.DeviceCore):
        return open_device(where, op)._state  # type: ignore[no-any-return]
    if isinstance(where, bool) or not isinstance(where, int):
        raise invalid(op, f"{what} must be a Device or a device ordinal, got {where!r}")
    cudevice(where, op)  # range check with the caller's op
    return state_for(where)
