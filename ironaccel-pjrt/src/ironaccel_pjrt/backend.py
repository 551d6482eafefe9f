"""The `pjrt` Backend: every installed PJRT plugin, its devices, and opening one.

* `probe()` discovers plugins (no loading), then dlopens each, calls
  `GetPjrtApi` and `PJRT_Plugin_Initialize`, and reads the API version and the
  plugin attributes -- without creating a client.  Available when at least
  one plugin loads.
* `devices()` creates one client per loaded plugin (cached) and lists one
  `DeviceDescriptor` per addressable device, numbered across plugins in
  discovery order.  A plugin whose client creation fails (the CUDA plugin
  without a GPU) is left out and reported by `failures()`; when none works,
  `devices()` raises `NotAvailable` with every plugin's reason.
* `open(ordinal)` returns a `PjrtDevice`.
"""

from __future__ import annotations

import threading
from typing import Any

from ironaccel.errors import DriverError, NotAvailable
from ironaccel.probing import ProbedBackend, ProbeFacts, check_ordinal, distribution_version
from ironaccel.types import CapabilityFlags, ComputeTier, DeviceDescriptor, DeviceKind, Vendor

from .api import BACKEND, load_api
from .client import Client, DeviceInfo
from .device import PjrtDevice
from .discovery import ENV_PLUGIN, PluginLocation, discover, searched_places

__all__ = ["Backend", "describe"]

INSTALL_FIX = (
    "pip install xla-cpu-pjrt (CPU), jax-cuda13-pjrt (NVIDIA GPU) or libtpu (TPU), "
    f"or name a plugin file with {ENV_PLUGIN}=/path/to/plugin.so"
)

_DATACENTER_GPUS = ("H100", "H200", "H20", "H800", "GH200", "B100", "B200", "GB200", "A100", "A800", "A30", "A40",
                    "L40", "L4", "V100", "MI2", "MI3")

_PLATFORMS = {
    "cpu": (DeviceKind.CPU, Vendor.UNKNOWN),
    "cuda": (DeviceKind.GPU, Vendor.NVIDIA),
    "gpu": (DeviceKind.GPU, Vendor.UNKNOWN),
    "rocm": (DeviceKind.GPU, Vendor.AMD),
    "tpu": (DeviceKind.TPU, Vendor.GOOGLE),
}


def _tier(kind: DeviceKind, name: str) -> ComputeTier:
    if kind is DeviceKind.CPU:
        return ComputeTier.SOFTWARE
    if kind is DeviceKind.TPU or any(tag in name.upper() for tag in _DATACENTER_GPUS):
        return ComputeTier.DATACENTER
    return ComputeTier.CONSUMER


def _capabilities(kind: DeviceKind, attributes: dict[str, Any]) -> CapabilityFlags:
    flags = CapabilityFlags.RUNTIME_COMPILE | CapabilityFlags.INT8 | CapabilityFlags.FP16 | CapabilityFlags.BF16
    if kind is not DeviceKind.TPU:
        flags |= CapabilityFlags.FP64
    if kind is not DeviceKind.CPU:
        flags |= CapabilityFlags.ASYNC_COPY
    major = str(attributes.get("compute_capability", "0")).split(".")[0]
    if kind is DeviceKind.TPU or (major.isdigit() and int(major) >= 7):
        flags |= CapabilityFlags.MATRIX_UNITS
    return flags


def describe(ordinal: int, info: DeviceInfo) -> DeviceDescriptor:
    """The core DeviceDescriptor of one PJRT device."""
    client = info.client
    platform = client.platform_name.lower()
    kind, vendor = _PLATFORMS.get(platform, (DeviceKind.GPU, Vendor.UNKNOWN))
    memory = 0
    try:
        memory = info.memory_stats().get("bytes_limit", 0)
    except (DriverError, NotImplementedError):  # CPU plugins do not implement memory stats
        pass
    return DeviceDescriptor(
        backend=BACKEND,
        ordinal=ordinal,
        name=f"{info.kind} ({client.plugin.name})",
        vendor=vendor,
        kind=kind,
        memory_bytes=int(memory),
        compute_tier=_tier(kind, info.kind),
        capabilities=_capabilities(kind, dict(info.attributes)),
        extras={
            "plugin": client.plugin.name,
            "plugin_path": client.plugin.path,
            "api_version": client.api.version_string,
            "platform": client.platform_name,
            "platform_version": client.platform_version,
            "device_id": info.id,
            "local_hardware_id": info.local_hardware_id,
            "description": info.description,
            "attributes": dict(info.attributes),
            "memory_kinds": [m.kind for m in info.memories],
            "default_memory": info.default_memory.kind if info.default_memory else None,
        },
    )


class Backend(ProbedBackend[list[dict[str, Any]]]):
    """PJRT through its C API: plugins found by `discovery`, loaded by `api`, one `Client` per plugin."""

    name = BACKEND

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.RLock()
        self._clients: dict[str, Client] = {}
        self._failures: dict[str, NotAvailable] = {}
        self._devices: list[tuple[DeviceDescriptor, DeviceInfo]] | None = None

    # -- probe --------------------------------------------------------------

    def plugins(self) -> list[PluginLocation]:
        """Installed or named plugins (nothing loaded)."""
        return discover()

    def _probe(self, facts: ProbeFacts) -> list[dict[str, Any]]:
        """Load every discovered plugin and read its version and attributes (no client is created)."""
        facts.record(binding_version=distribution_version("ironaccel-pjrt"))
        plugins = discover()
        if not plugins:
            raise NotAvailable(BACKEND, "no PJRT plugin found (looked at " + "; ".join(searched_places()) + ")",
                               fix=INSTALL_FIX)
        reports: list[dict[str, Any]] = []
        loaded: list[str] = []
        for plugin in plugins:
            report: dict[str, Any] = {"name": plugin.name, "path": plugin.path, "source": plugin.source}
            try:
                api = load_api(plugin.path)
                api.initialize()
                report["api_version"] = api.version_string
                report["attributes"] = api.attributes()
                loaded.append(f"{plugin.name} (API {api.version_string})")
            except (NotAvailable, DriverError) as exc:
                report["error"] = str(exc)
            reports.append(report)
        facts.extra(plugins=reports)
        if not loaded:
            raise NotAvailable(BACKEND, "no PJRT plugin loads: " + "; ".join(f"{r['name']}: {r['error']}"
                                                                          for r in reports), fix=INSTALL_FIX,
                               searched=[p.path for p in plugins])
        facts.record(runtime_version=", ".join(sorted({r["api_version"] for r in reports if "api_version" in r})),
                     library_path=next(r for r in reports if "error" not in r)["path"])
        facts.found(f"{len(loaded)} PJRT plugin(s): " + ", ".join(loaded), 0)
        return reports

    def refresh(self) -> None:
        """Forget the probe, the plugins whose client failed and the device list; open clients stay open."""
        super().refresh()
        with self._lock:
            self._failures.clear()
            self._devices = None

    # -- clients and devices -----------------------------------------------------

    def client(self, plugin: PluginLocation | str) -> Client:
        """The backend's client of `plugin` (a location or a plugin name), created once; NotAvailable if it fails."""
        location = self._plugin(plugin)
        with self._lock:
            client = self._clients.get(location.path)
            if client is not None and not client.closed:
                return client
            failure = self._failures.get(location.path)
            if failure is not None:
                raise failure
            try:
                client = Client.create(location)
            except NotAvailable as exc:
                self._failures[location.path] = exc
                raise
            self._clients[location.path] = client
            self._devices = None
            return client

    def _plugin(self, plugin: PluginLocation | str) -> PluginLocation:
        if isinstance(plugin, PluginLocation):
            return plugin
        for location in discover():
            if plugin in (location.name, location.path):
                return location
        raise NotAvailable(BACKEND, f"no PJRT plugin named {plugin!r} (found {[p.name for p in discover()]})",
                           fix=INSTALL_FIX)

    def failures(self) -> dict[str, str]:
        """Plugins whose client could not be created, with the reason (after `devices()`)."""
        return {path: exc.reason for path, exc in self._failures.items()}

    def _enumerate(self) -> list[tuple[DeviceDescriptor, DeviceInfo]]:
        with self._lock:
            if self._devices is not None and all(not info.client.closed for _, info in self._devices):
                return self._devices
            self._state()
            found: list[tuple[DeviceDescriptor, DeviceInfo]] = []
            for plugin in discover():
                try:
                    client = self.client(plugin)
                except NotAvailable:
                    continue
                for info in client.devices:
                    found.append((describe(len(found), info), info))
            if not found:
                reasons = "; ".join(self.failures().values()) or "the plugins list no addressable device"
                raise NotAvailable(BACKEND, f"no PJRT plugin gave a usable client: {reasons}", fix=INSTALL_FIX)
            self._devices = found
            return found

    def devices(self) -> list[DeviceDescriptor]:
        """Every addressable device of every PJRT plugin found, as descriptors."""
        return [descriptor for descriptor, _ in self._enumerate()]

    def open(self, ordinal: int = 0) -> PjrtDevice:
        """Open device `ordinal` (in the order `devices()` lists them) as a PjrtDevice."""
        devices = self._enumerate()
        descriptor, info = devices[check_ordinal(BACKEND, ordinal, len(devices))]
        return PjrtDevice(descriptor, info)

    def close(self) -> None:
        """Close every client this backend created (their buffers and executables with them)."""
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()
            self._failures.clear()
            self._devices = None
