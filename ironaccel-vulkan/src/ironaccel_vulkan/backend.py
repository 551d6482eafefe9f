"""The Vulkan Backend: probe, enumerate, open.

The probe loads the loader and pyvulkan, creates an instance, reads every
physical device and destroys the instance again; its ProbeResult carries the
loader's API version and path and, when Vulkan is unusable, exactly why (no
binding, no loader and where it looked, no driver or no device with the
VkResult).  Each opened device gets an instance of its own.
"""

from __future__ import annotations

import os
from typing import Any

from ironaccel.errors import InvalidArgument, NotAvailable
from ironaccel.probing import ProbedBackend, ProbeFacts, check_ordinal
from ironaccel.types import DeviceDescriptor

from . import binding as _binding
from . import validation
from .binding import BACKEND
from .device import DEFAULT_STAGING_CHUNK, VulkanDevice
from .instance import Instance, version_string
from .memory import MEMORY_MODES
from .physical import PhysicalDeviceInfo, read_info

__all__ = ["Backend"]


class Backend(ProbedBackend[list[PhysicalDeviceInfo]]):
    """Vulkan through pyvulkan.  `validation=True` (or IRONACCEL_VULKAN_VALIDATION=1) enables the Khronos layer."""

    name = BACKEND

    def __init__(self, *, validation: bool | None = None):
        super().__init__()
        self._validation = validation

    @property
    def validation(self) -> bool:
        """Whether instances get the Khronos validation layer: the constructor's `validation`, else the environment."""
        return validation.requested(self._validation)

    def _probe(self, facts: ProbeFacts) -> list[PhysicalDeviceInfo]:
        binding = _binding.load()
        facts.record(binding_version=binding.binding_version, library_path=binding.loader_path)
        instance = Instance(binding, validation_layer=self.validation)
        try:
            facts.record(runtime_version=f"Vulkan loader {version_string(instance.loader_version)}")
            facts.extra(instance_api_version=version_string(instance.api_version),
                        validation_layer=instance.validation_layer, layers_available=instance.layers_available)
            drivers = {v: os.environ[v] for v in ("VK_DRIVER_FILES", "VK_ICD_FILENAMES") if os.environ.get(v)}
            if drivers:
                facts.extra(driver_files=drivers)
            handles = instance.physical_devices()
            infos = [read_info(binding, h, i, instance.api_version) for i, h in enumerate(handles)]
        finally:
            instance.close()
        first = infos[0]
        facts.record(driver_version=f"{first.driver_name} {first.driver_info}".strip() or first.driver_version_string())
        names = "; ".join(f"{i.name} ({i.descriptor().extras['device_type']}, Vulkan {version_string(i.api_version)})"
                          for i in infos)
        facts.found(f"{len(infos)} physical device(s): {names}", len(infos))
        return infos

    def devices(self) -> list[DeviceDescriptor]:
        """Every Vulkan physical device as a descriptor, ordinals 0..n-1; NotAvailable when the probe failed."""
        return [info.descriptor() for info in self._state()]

    def open(self, ordinal: int = 0, *, memory: str = "auto", staging_chunk_bytes: int = DEFAULT_STAGING_CHUNK,
             queues: int | None = None) -> VulkanDevice:
        """Open physical device `ordinal` as a ComputeDevice (see VulkanDevice for `memory` and `queues`)."""
        infos = self._state()
        ordinal = check_ordinal(BACKEND, ordinal, len(infos))
        family = infos[ordinal].compute_family()
        have = family.count if family is not None else 0
        if queues is not None and (isinstance(queues, bool) or not isinstance(queues, int) or not 1 <= queues <= have):
            raise InvalidArgument(BACKEND, "open", detail=f"queues must be an int from 1 to {have} (the queues of "
                                  f"{infos[ordinal].name}'s compute family), got {queues!r}")
        if memory not in MEMORY_MODES:
            raise InvalidArgument(BACKEND, "open", detail=f"memory must be one of {MEMORY_MODES}, got {memory!r}")
        if isinstance(staging_chunk_bytes, bool) or not isinstance(staging_chunk_bytes, int) or \
                staging_chunk_bytes < 4096:
            raise InvalidArgument(BACKEND, "open", detail=f"staging_chunk_bytes must be an int >= 4096, "
                                  f"got {staging_chunk_bytes!r}")
        binding = _binding.load()
        instance = Instance(binding, validation_layer=self.validation)
        try:
            handles = instance.physical_devices()
            expected = infos[ordinal]
            physical, info = _match(binding, instance, handles, expected)
            return VulkanDevice(binding, instance, physical, info, memory=memory,
                                staging_chunk_bytes=staging_chunk_bytes, queues=queues)
        except BaseException:
            instance.close()
            raise


def _match(binding: _binding.Binding, instance: Instance, handles: list[Any],
           expected: PhysicalDeviceInfo) -> tuple[Any, PhysicalDeviceInfo]:
    """The physical device of this instance that the probe saw at `expected.ordinal` (same UUID)."""
    candidates = [expected.ordinal] + [i for i in range(len(handles)) if i != expected.ordinal]
    for index in candidates:
        if index >= len(handles):
            continue
        info = read_info(binding, handles[index], expected.ordinal, instance.api_version)
        if not expected.device_uuid or info.device_uuid == expected.device_uuid:
            return handles[index], info
    raise NotAvailable(BACKEND, f"device {expected.ordinal} ({expected.name}) is no longer present")
