"""The webgpu Backend: probe by importing wgpu and enumerating adapters; open a WebGPUDevice."""

from __future__ import annotations

import threading
from typing import Any

from ironaccel.errors import InvalidArgument, NotAvailable
from ironaccel.probing import distribution_version, import_binding, probe_guard
from ironaccel.types import DeviceDescriptor, ProbeResult

from .adapters import AdapterEntry, enumerate_adapters

BACKEND = "webgpu"
FIX_BINDING = "pip install wgpu"
FIX_DRIVER = ("install a Vulkan, Metal, D3D12 or OpenGL driver wgpu-native can use "
              "(on Linux without a GPU: apt-get install mesa-vulkan-drivers libegl-mesa0)")


class Backend:
    """WebGPU through wgpu-py (wgpu-native): every adapter it sees, in a stable order."""

    name = BACKEND

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wgpu: Any = None
        self._adapters: list[AdapterEntry] | None = None

    def _load(self) -> list[AdapterEntry]:
        """Import wgpu and enumerate adapters, once; NotAvailable says why it can't."""
        with self._lock:
            if self._adapters is None:
                wgpu = import_binding(BACKEND, "wgpu", "wgpu", fix=FIX_BINDING)
                try:
                    adapters = enumerate_adapters(wgpu)
                except Exception as exc:  # wgpu-native failed to load or to create an instance
                    raise NotAvailable(BACKEND, f"wgpu-native could not enumerate adapters: "
                                       f"{type(exc).__name__}: {exc}", fix=FIX_DRIVER) from exc
                if not adapters:
                    raise NotAvailable(BACKEND, "wgpu-native found no adapter (no Vulkan, Metal, D3D12 or GL driver "
                                       "it can use)", fix=FIX_DRIVER)
                self._wgpu, self._adapters = wgpu, adapters
            return self._adapters

    def probe(self) -> ProbeResult:
        """Available with the adapters listed, or unavailable saying why; never raises NotAvailable."""
        return probe_guard(self._probe)()

    def _probe(self) -> ProbeResult:
        adapters = self._load()
        return ProbeResult(
            backend=BACKEND,
            available=True,
            reason=f"{len(adapters)} adapter(s): " + ", ".join(a.descriptor.name for a in adapters),
            binding_version=distribution_version("wgpu"),
            runtime_version=_native_attr("__version__"),
            library_path=_native_attr("lib_path"),
            device_count=len(adapters),
        )

    def refresh(self) -> None:
        """Forget the enumerated adapters, so the next call enumerates again."""
        with self._lock:
            self._adapters = None

    def devices(self) -> list[DeviceDescriptor]:
        return [a.descriptor for a in self._load()]

    def open(self, ordinal: int = 0) -> Any:
        adapters = self._load()
        if isinstance(ordinal, bool) or not isinstance(ordinal, int) or not 0 <= ordinal < len(adapters):
            raise InvalidArgument(BACKEND, "open", detail=f"ordinal {ordinal!r} out of range 0..{len(adapters) - 1}")
        from .device import WebGPUDevice

        entry = adapters[ordinal]
        return WebGPUDevice(self._wgpu, entry.adapter, entry.descriptor)


def _native_attr(name: str) -> str | None:
    """wgpu-native's version or library path, as wgpu-py reports them (informational)."""
    try:
        from wgpu.backends import wgpu_native

        return str(getattr(wgpu_native, name))
    except Exception:
        return None
