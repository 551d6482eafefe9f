"""cuda.core's `launch(stream, config, kernel, *args)` on ironaccel's `Function.launch`.

The launch is ironaccel's (arguments packed against the kernel's own parameter
layout, the compiled hot path): `launch` itself is compiled (`_core.compat_launch`),
passes `Buffer` arguments as their DeviceBufs (or addresses) and hands everything
over; other argument kinds are converted on a cold retry path.  Clusters,
cooperative and programmatic launches go through ironaccel's own `LaunchConfig`
(cuLaunchKernelEx); cuda.core's grid counts clusters, ironaccel's blocks, so the
grid is scaled here.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import Any

from . import _ia
from ._kernel_arg_handler import convert_arg
from ._launch_config import LaunchConfig
from ._memory._buffer import Buffer
from ._module import Kernel
from ._stream import Stream_accept
from ._utils.cuda_utils import from_ironaccel

__all__ = ["launch"]


def _launch_cold(stream: Any, config: Any, kernel: Any, kernel_args: tuple[Any, ...], error: Any) -> None:
    """Every launch the compiled fast path (`_core.compat_launch`) does not make: `error` is the ironaccel error
    it met (a driver failure becomes cuda.core's CUDAError; an argument the packer refused is converted and
    retried), or None (a case it does not take: the checks below say what is wrong, or launch it)."""
    if error is not None:
        if error.code is not None:
            raise from_ironaccel(error) from None
        _launch_converted(kernel._fn, stream, config._grid, config, kernel_args, None, error)
        return
    _launch_checked(stream, config, kernel, kernel_args)


_ia._core.set_compat_launch(_launch_cold, Buffer)
launch: Callable[..., None] = _ia._core.compat_launch
"""launch(stream, config, kernel, *kernel_args): queue `kernel` on `stream` (a Stream or a GraphBuilder) as
`config` says; compiled (`_core.compat_launch`), with `_launch_cold` for what it does not take."""


def _launch_checked(stream: Any, config: Any, kernel: Any, kernel_args: tuple[Any, ...]) -> None:
    """The launch of any other case: argument checks, foreign streams, the default streams, launch attributes."""
    if not isinstance(stream, _ia.IaStream):
        stream = Stream_accept(stream, allow_stream_protocol=True)
    if not isinstance(config, LaunchConfig):
        raise TypeError(f"config must be a LaunchConfig, got {type(config).__name__}")
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a Kernel, got {type(kernel).__name__}")
    fn = kernel._fn
    if stream._ordinal != fn._ordinal:
        fn, stream = kernel._for_stream(stream)
    if not config._plain:
        _launch_with_attributes(fn, stream, config, kernel_args)
        return
    _launch_converted(fn, stream, config._grid, config, kernel_args, None, None)


def _launch_converted(fn: Any, stream: Any, grid: Any, config: LaunchConfig, kernel_args: tuple[Any, ...],
                      ia_config: Any, first: Exception | None) -> None:
    """Cold: convert every argument (ctypes, complex, subclasses) and launch."""
    args = [convert_arg(a) for a in kernel_args]
    try:
        fn.launch(grid, config._block, *args, stream=stream, shared_mem=config.shmem_size, config=ia_config)
    except _ia.DriverError as exc:
        if exc.code is not None:
            raise from_ironaccel(exc) from None
        raise exc from first


def _launch_with_attributes(fn: Any, stream: Any, config: LaunchConfig, kernel_args: tuple[Any, ...]) -> None:
    """A launch with clusters, cooperative or programmatic serialization (ironaccel's LaunchConfig)."""
    grid: tuple[int, ...] = config.grid
    if config.is_cooperative:
        sms = fn.device.attributes.multiprocessor_count
        limit = fn.max_active_blocks_per_sm(prod(config.block), config.shmem_size) * sms
        if prod(grid) > limit:
            x, y, z = grid
            raise ValueError(f"The specified grid size ({x} * {y} * {z}) exceeds the limit ({limit})")
    if config.cluster is not None:
        if not all(0 <= c < 1 << 32 for c in config.cluster):  # cuda.core's OverflowError, from its unsigned ints
            raise OverflowError(f"launch: LaunchConfig.cluster={config.cluster} does not fit unsigned 32-bit "
                                "dimensions")
        grid = tuple(g * c for g, c in zip(grid, config.cluster))
    try:
        ia_config = _ia.IaLaunchConfig(cooperative=config.is_cooperative, cluster=config.cluster,
                                       programmatic_serialization=config.programmatic_stream_serialization)
    except _ia.DriverError as exc:
        raise from_ironaccel(exc) from None
    _launch_converted(fn, stream, grid, config, kernel_args, ia_config, None)

