"""cuda.core's `LaunchConfig`: grid, block and dynamic shared memory (clusters and cooperative: see below).

`cluster=`, `is_cooperative=True` and `programmatic_stream_serialization=True` are
validated and kept here, and `_to_native_launch_config` builds the driver's
`CUlaunchConfig` with their attributes; `launch()` refuses them until ironaccel's own
launch configuration carries launch attributes (the lead's work).
"""

from __future__ import annotations

from typing import Any

from ._device import Device
from ._utils.cuda_utils import CUDAError, cast_to_3_tuple, driver

__all__ = ["LaunchConfig"]

_LAUNCH_CONFIG_ATTRS = ("grid", "cluster", "block", "shmem_size", "is_cooperative",
                        "programmatic_stream_serialization")


class LaunchConfig:
    """How to launch a kernel: `grid` (in clusters when `cluster` is set), `block`, `shmem_size` bytes."""

    __slots__ = _LAUNCH_CONFIG_ATTRS

    def __init__(self, grid: Any = None, cluster: Any = None, block: Any = None, shmem_size: int | None = None,
                 is_cooperative: bool = False, programmatic_stream_serialization: bool = False) -> None:
        self.grid = cast_to_3_tuple("LaunchConfig.grid", grid)
        self.block = cast_to_3_tuple("LaunchConfig.block", block)
        if cluster is not None:
            if tuple(Device().compute_capability) < (9, 0):
                raise CUDAError("thread block clusters are not supported on devices with compute capability < 9.0")
            self.cluster: tuple[int, int, int] | None = cast_to_3_tuple("LaunchConfig.cluster", cluster)
        else:
            self.cluster = None
        self.shmem_size = 0 if shmem_size is None else shmem_size
        if is_cooperative and not Device().properties.cooperative_launch:
            raise CUDAError("cooperative kernels are not supported on this device")
        self.is_cooperative = bool(is_cooperative)
        self.programmatic_stream_serialization = bool(programmatic_stream_serialization)

    def _identity(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _LAUNCH_CONFIG_ATTRS)

    def __repr__(self) -> str:
        return "LaunchConfig(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in _LAUNCH_CONFIG_ATTRS) + ")"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LaunchConfig):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())


def _to_native_launch_config(config: LaunchConfig) -> Any:
    """The driver's `CUlaunchConfig` for `config` (grid in blocks, with the cluster / cooperative attributes)."""
    native = driver.CUlaunchConfig()
    grid = config.grid
    cluster = config.cluster
    attrs = []
    if cluster is not None:
        grid = tuple(g * c for g, c in zip(grid, cluster))
        attr = driver.CUlaunchAttribute()
        attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
        attrs.append(attr)
    if config.is_cooperative:
        attr = driver.CUlaunchAttribute()
        attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
        attr.value.cooperative = 1
        attrs.append(attr)
    if config.programmatic_stream_serialization:
        attr = driver.CUlaunchAttribute()
        attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attr.value.programmaticStreamSerializationAllowed = 1
        attrs.append(attr)
    native.gridDimX, native.gridDimY, native.gridDimZ = grid
    native.blockDimX, native.blockDimY, native.blockDimZ = config.block
    native.sharedMemBytes = config.shmem_size
    native.attrs = attrs
    native.numAttrs = len(attrs)
    return native
