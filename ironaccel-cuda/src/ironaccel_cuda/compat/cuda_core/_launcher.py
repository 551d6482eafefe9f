"""cuda.core's `launch(stream, config, kernel, *args)` on ironaccel's `Function.launch`.

The launch is ironaccel's (arguments packed against the kernel's own parameter
layout, the compiled hot path): this function converts `Buffer` arguments to their
addresses and hands everything over; other argument kinds are converted on a cold
retry path.
"""

from __future__ import annotations

from typing import Any

from . import _ia, _needs
from ._kernel_arg_handler import convert_arg
from ._launch_config import LaunchConfig
from ._memory._buffer import Buffer
from ._missing import missing_error
from ._module import Kernel
from ._stream import Stream, Stream_accept
from ._utils.cuda_utils import from_ironaccel

__all__ = ["launch"]


def launch(stream: Any, config: LaunchConfig, kernel: Kernel, *kernel_args: Any) -> None:
    """Queue `kernel` with `kernel_args` on `stream` (a Stream or a GraphBuilder) as `config` says."""
    if stream.__class__ is not Stream:
        stream = Stream_accept(stream, allow_stream_protocol=True)
    if config.__class__ is not LaunchConfig and not isinstance(config, LaunchConfig):
        raise TypeError(f"config must be a LaunchConfig, got {type(config).__name__}")
    if kernel.__class__ is not Kernel and not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a Kernel, got {type(kernel).__name__}")
    if config.cluster is not None or config.is_cooperative or config.programmatic_stream_serialization:
        raise missing_error("launch with clusters, cooperative or programmatic launch", _needs.LAUNCH_ATTRS)
    fn = kernel._fn
    if stream._ordinal != fn._ordinal:
        fn, stream = kernel._for_stream(stream)
    args = [a._ptr if a.__class__ is Buffer else a for a in kernel_args]
    try:
        fn.launch(config.grid, config.block, *args, stream=stream, shared_mem=config.shmem_size)
    except _ia.DriverError as exc:
        if exc.code is not None:
            raise from_ironaccel(exc) from None
        _launch_converted(fn, stream, config, kernel_args, exc)


def _launch_converted(fn: Any, stream: Any, config: LaunchConfig, kernel_args: tuple[Any, ...], first: Exception
                      ) -> None:
    """Cold: convert every argument (ctypes, complex, subclasses) and launch again."""
    args = [convert_arg(a) for a in kernel_args]
    try:
        fn.launch(config.grid, config.block, *args, stream=stream, shared_mem=config.shmem_size)
    except _ia.DriverError as exc:
        if exc.code is not None:
            raise from_ironaccel(exc) from None
        raise exc from first

