"""cuda.core's `Context`: a view of a CUDA context (here the primary context ironaccel retains).

Explicit and green contexts (`Device.create_context`, `ContextOptions.resources`) wait
for issue 15; a Context here is always a primary context or one found current.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import _needs
from ._utils.cuda_utils import driver

__all__ = ["Context", "ContextOptions"]

DeviceResourcesType = Sequence[Any]


class Context:
    """A CUDA context; equal to another view of the same context."""

    __slots__ = ("_handle_int", "_device_id", "__weakref__")
    _handle_int: int
    _device_id: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Context objects cannot be instantiated directly. Please use Device or Stream APIs.")

    @classmethod
    def _from_ctx(cls, ctx: Any, device_id: int) -> Context:
        self = object.__new__(cls)
        self._handle_int = int(ctx)
        self._device_id = device_id
        return self

    @property
    def handle(self) -> Any:
        return driver.CUcontext(self._handle_int)

    @property
    def _handle(self) -> Any:
        return self.handle

    @property
    def is_closed(self) -> bool:
        return False

    @property
    def is_green(self) -> bool:
        return False

    @property
    def resources(self) -> Any:
        from ._missing import missing_error

        raise missing_error("Context.resources", _needs.RESOURCES)

    def create_stream(self, options: Any = None) -> Any:
        from ._stream import Stream

        return Stream._init(options=options, device_id=self._device_id)

    def close(self) -> None:
        """Primary contexts stay retained by ironaccel for the life of the process: nothing to release."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Context):
            return NotImplemented
        return self._handle_int == other._handle_int

    def __hash__(self) -> int:
        return hash((Context, self._handle_int))

    def __repr__(self) -> str:
        return f"<Context handle={self._handle_int:#x} device={self._device_id}>"


@dataclass
class ContextOptions:
    """Options of `Device.create_context` (green contexts: not available yet, see the coverage map)."""

    resources: DeviceResourcesType = ()
