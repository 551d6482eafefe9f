"""The webgpu Backend: probe by importing wgpu and enumerating adapters; open a WebGPUDevice."""

from __future__ import annotations

from typing import Any

from ironaccel.errors import NotAvailable
from ironaccel.probing import ProbedBackend, ProbeFacts, check_ordinal, distribution_version, import_binding
from ironaccel.types import DeviceDescriptor

from .adapters import AdapterEntry, enumerate_adapters

BACKEND = "webgpu"
FIX_BINDING = "pip install wgpu"
FIX_DRIVER = ("install a Vulkan, Metal, D3D12 or OpenGL driver wgpu-native can use "
              "(on Linux without a GPU: apt-get install mesa-vulkan-drivers libegl-mesa0)")


class Backend(ProbedBackend[tuple[Any, list[AdapterEntry]]]):
    """WebGPU through wgpu-py (wgpu-native): every adapter it sees, in a stable order."""

    name = BACKEND

    def _probe(self, facts: ProbeFacts) -> tuple[Any, list[AdapterEntry]]:
        """Import wgpu and enumerate adapters; NotAvailable says why it can't."""
        wgpu = import_binding(BACKEND, "wgpu", "wgpu", fix=FIX_BINDING)
        facts.record(binding_version=distribution_version("wgpu"), runtime_version=_native_attr("__version__"),
                     library_path=_native_attr("lib_path"))
        try:
            adapters = enumerate_adapters(wgpu)
        except Exception as exc:  # wgpu-native failed to load or to create an instance
            raise NotAvailable(BACKEND, f"wgpu-native could not enumerate adapters: "
                               f"{type(exc).__name__}: {exc}", fix=FIX_DRIVER) from exc
        if not adapters:
            raise NotAvailable(BACKEND, "wgpu-native found no adapter (no Vulkan, Metal, D3D12 or GL driver "
                               "it can use)", fix=FIX_DRIVER)
        facts.found(f"{len(adapters)} adapter(s): " + ", ".join(a.descriptor.name for a in adapters), len(adapters))
        return wgpu, adapters

    def devices(self) -> list[DeviceDescriptor]:
        """Every adapter wgpu-native found, as descriptors."""
        return [a.descriptor for a in self._state()[1]]

    def open(self, ordinal: int = 0) -> Any:
        """Open adapter `ordinal` as a WebGPU ComputeDevice."""
        wgpu, adapters = self._state()
        entry = adapters[check_ordinal(BACKEND, ordinal, len(adapters))]
        from .device import WebGPUDevice

        return WebGPUDevice(wgpu, entry.adapter, entry.descriptor)


def _native_attr(name: str) -> str | None:
    """wgpu-native's version or library path, as wgpu-py reports them (informational)."""
    try:
        from wgpu.backends import wgpu_native

        return str(getattr(wgpu_native, name))
    except Exception:
        return None
