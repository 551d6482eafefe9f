"""cuda.core's `LaunchConfig`: grid, block and dynamic shared memory (clusters and cooperative: see below).

`cluster=` (grid counted in clusters, as in cuda.core), `is_cooperative=True` and
`programmatic_stream_serialization=True` are validated here; `launch()` hands them to
ironaccel's `LaunchConfig` (cuLaunchKernelEx).  `_to_native_launch_config` builds
the driver's `CUlaunchConfig` the way cuda.core does.
"""

from __future__ import annotations

import operator
from typing import Any

from ._device import Device
from ._utils.cuda_utils import CUDAError, cast_to_3_tuple, driver

__all__ = ["LaunchConfig"]

_LAUNCH_CONFIG_ATTRS = ("grid", "cluster", "block", "shmem_size", "is_cooperative",
                        "programmatic_stream_serialization")


class LaunchConfig:
    """How to launch a kernel: `grid` (in clusters when `cluster` is set), `block`, `shmem_size` bytes.

    The attributes can be changed after construction, as in cuda.core; `launch` reads the
    derived `_grid` / `_block` (an int where the dimension is one-dimensional, which
    ironaccel's launch takes on its fastest path) and `_plain` (no launch attributes), and
    the compiled launch `_fast`: (`_grid`, `_block`, `shmem_size`) of a plain config, else None.
    """

    __slots__ = (*_LAUNCH_CONFIG_ATTRS, "_grid", "_block", "_plain", "_fast", "__weakref__")
    grid: tuple[int, int, int]
    cluster: tuple[int, int, int] | None
    block: tuple[int, int, int]
    shmem_size: int
    is_cooperative: bool
    programmatic_stream_serialization: bool
    _grid: int | tuple[int, int, int]
    _block: int | tuple[int, int, int]
    _plain: bool
    _fast: tuple[Any, Any, int] | None

    def __init__(self, grid: Any = None, cluster: Any = None, block: Any = None, shmem_size: int | None = None,
                 is_cooperative: bool = False, programmatic_stream_serialization: bool = False) -> None:
        self.grid = cast_to_3_tuple("LaunchConfig.grid", grid)
        self.block = cast_to_3_tuple("LaunchConfig.block", block)
        if cluster is not None:
            if tuple(Device().compute_capability) < (9, 0):
                raise CUDAError("thread block clusters are not supported on devices with compute capability < 9.0")
            self.cluster = cast_to_3_tuple("LaunchConfig.cluster", cluster)
        else:
            self.cluster = None
        self.shmem_size = 0 if shmem_size is None else shmem_size
        if is_cooperative and not Device().properties.cooperative_launch:
            raise CUDAError("cooperative kernels are not supported on this device")
        self.is_cooperative = bool(is_cooperative)
        self.programmatic_stream_serialization = bool(programmatic_stream_serialization)

    def __setattr__(self, name: str, value: Any) -> None:
        value = _checked(name, value)
        object.__setattr__(self, name, value)
        if name == "grid" or name == "block":
            object.__setattr__(self, "_" + name, value[0] if value[1:] == (1, 1) else value)
        elif name in ("cluster", "is_cooperative", "programmatic_stream_serialization"):
            object.__setattr__(self, "_plain", getattr(self, "cluster", None) is None and not getattr(
                self, "is_cooperative", False) and not getattr(self, "programmatic_stream_serialization", False))
        grid, block = getattr(self, "_grid", None), getattr(self, "_block", None)
        fast = (grid, block, getattr(self, "shmem_size", 0)) if getattr(self, "_plain", True) else None
        object.__setattr__(self, "_fast", fast if grid is not None and block is not None else None)

    def _identity(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _LAUNCH_CONFIG_ATTRS)

    def __repr__(self) -> str:
        # cuda.core's five fields; the compat's programmatic_stream_serialization only when it is on
        names = _LAUNCH_CONFIG_ATTRS if self.programmatic_stream_serialization else _LAUNCH_CONFIG_ATTRS[:5]
        return "LaunchConfig(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in names) + ")"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LaunchConfig):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())


_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


def _checked(name: str, value: Any) -> Any:
    """`value` for field `name`, checked as cuda.core types its fields: `grid` / `block` tuples, `cluster` a tuple
    or None, `shmem_size` a C int (stored as an int)."""
    if name in ("grid", "block") or (name == "cluster" and value is not None):
        if not isinstance(value, tuple):
            raise TypeError(f"LaunchConfig.{name} must be a tuple, got {type(value).__name__}")
    elif name == "shmem_size":
        try:
            value = operator.index(value)
        except TypeError:
            raise TypeError(f"LaunchConfig.shmem_size must be an int, got {type(value).__name__}") from None
        if not _INT_MIN <= value <= _INT_MAX:
            raise OverflowError(f"LaunchConfig.shmem_size={value} does not fit a C int")
    return value


def _to_native_launch_config(config: LaunchConfig) -> Any:
    """The driver's `CUlaunchConfig` for `config` (grid in blocks, with the cluster / cooperative attributes)."""
    native = driver.CUlaunchConfig()
    grid: tuple[int, ...] = config.grid
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
