"""cuda.core's `Context`: a view of a CUDA context, primary or green.

The primary context is the one ironaccel retains for each device.  A green context
(`Device.create_context(ContextOptions(resources=[sm_group, ...]))`) is ironaccel's
`GreenContext` over those resources; its streams (`ctx.create_stream()`, or
`dev.create_stream()` while it is set current) run on its SMs, and events recorded on
them belong to it.  Closing a green context closes its streams and events first.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import _ia
from ._utils.cuda_utils import driver
from ._utils.cuda_utils import from_ironaccel as _from_ironaccel

__all__ = ["Context", "ContextOptions"]

DeviceResourcesType = Sequence[Any]

_green_views: weakref.WeakValueDictionary[int, Context] = weakref.WeakValueDictionary()


class Context:
    """A CUDA context; equal to another view of the same context."""

    __slots__ = ("_handle_int", "_device_id", "_green", "__weakref__")
    _handle_int: int
    _device_id: int
    _green: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Context objects cannot be instantiated directly. Please use Device or Stream APIs.")

    @classmethod
    def _from_ctx(cls, ctx: Any, device_id: int) -> Context:
        """The view of context `ctx`: the green context made here when it is one, else a new primary view."""
        address = int(ctx)
        known = _green_views.get(address)
        if known is not None:
            return known
        self = object.__new__(cls)
        self._handle_int = address
        self._device_id = device_id
        self._green = None
        return self

    @classmethod
    def _create_green(cls, device: Any, options: Any) -> Context:
        """A new green context of `device` over `options.resources` (cuGreenCtxCreate; not made current)."""
        from ._device_resources import SMResource, WorkqueueResource, _check_green_ctx_support

        if options.resources is None:
            raise ValueError("ContextOptions.resources must be provided to create a green context")
        resources = tuple(options.resources)
        if not resources:
            raise ValueError("ContextOptions.resources must not be empty")
        raw = []
        for res in resources:
            if isinstance(res, SMResource):
                if not res._is_usable:
                    raise ValueError("dry-run SMResource objects cannot be used to create a context")
                raw.append(res._res)
            elif isinstance(res, WorkqueueResource):
                raw.append(res._wq_config)
            else:
                raise TypeError(f"Unsupported context resource type: {type(res)}")
        _check_green_ctx_support()
        try:
            green = _ia.IaGreenContext._create(device, raw)
        except _ia.DriverError as exc:
            raise _from_ironaccel(exc) from None
        self = object.__new__(cls)
        self._handle_int = green.handle
        self._device_id = device.ordinal
        self._green = green
        _green_views[self._handle_int] = self
        return self

    @property
    def handle(self) -> Any:
        """The `CUcontext` (None once closed)."""
        if not self._handle_int:
            return None
        return driver.CUcontext(self._handle_int)

    @property
    def _handle(self) -> Any:
        return self.handle

    @property
    def is_closed(self) -> bool:
        return not self._handle_int

    @property
    def is_green(self) -> bool:
        return self._green is not None

    @property
    def resources(self) -> Any:
        """The resources of this context: a green context's partition, or the whole device for a primary one."""
        from ._device_resources import DeviceResources

        if self.is_closed:
            raise RuntimeError("Cannot query resources on a closed context")
        return DeviceResources._init(self._device_id, self)

    def create_stream(self, options: Any = None) -> Any:
        """A new stream of this green context (for a primary context use `Device.create_stream`)."""
        from ._stream import Stream

        if self.is_closed:
            raise RuntimeError("Cannot create a stream on a closed context")
        if self._green is None:
            raise RuntimeError("Context.create_stream() is only supported on green contexts. Use "
                               "Device.create_stream() for primary contexts.")
        return Stream._init(options=options, device_id=self._device_id, ctx=self)

    def _new_stream(self, cls: Any, device: Any, nonblocking: bool, priority: int) -> Any:
        """A `cls` stream made in this green context (cuGreenCtxStreamCreate), closed with it."""
        from ._utils.cuda_utils import guarded

        green = self._green
        if not nonblocking:
            raise ValueError("Green context streams must be non-blocking. Use StreamOptions(nonblocking=True).")
        if self.is_closed:
            raise RuntimeError("Cannot create a stream on a closed context")
        h = guarded(green.create_stream, int(priority)).release()  # this context's stream, owned by the `cls` one
        s = cls._make(h, device, owned=True, priority=priority, non_blocking=True)
        s._cu = None
        s._owner = self
        green._adopt(s)
        return s

    def _new_event(self, cls: Any, device: Any, flags: int) -> Any:
        """A `cls` event made in this context (cuEventCreate with it current), a green context's closed with it.

        The thread's current context is the same afterwards.
        """
        green = self._green
        if self.is_closed:
            raise RuntimeError("Cannot create an event on a closed context")
        try:
            if green is not None:
                with green._current("cuEventCreate"):
                    h = _ia.event_create(flags)
            else:
                before = _ia.current_context()
                _ia.bind_address(self._handle_int)
                try:
                    h = _ia.event_create(flags)
                finally:
                    _ia.bind_address(before)
        except _ia.DriverError as exc:
            raise _from_ironaccel(exc) from None
        e = _ia.new_event(cls, h, device, not flags & 2)
        if green is not None:
            green._adopt(e)
        return e

    def close(self) -> None:
        """Destroy a green context after its streams and events (a primary context stays retained by ironaccel).

        Closing a context that is current on this thread is refused: set another current first.
        """
        if not self._handle_int:
            return
        if _ia.current_context() == self._handle_int:
            raise RuntimeError("Cannot close a CUDA context while it is current. Restore a previous context before "
                               "closing this context.")
        green = self._green
        if green is None:
            return
        _green_views.pop(self._handle_int, None)
        self._handle_int = 0
        self._green = None
        try:
            green.close()
        except _ia.DriverError as exc:
            raise _from_ironaccel(exc) from None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Context):
            return NotImplemented
        if not self._handle_int or not other._handle_int:
            return self is other
        return self._handle_int == other._handle_int

    def __hash__(self) -> int:
        return hash((Context, self._handle_int))

    def __repr__(self) -> str:
        return f"<Context handle={self._handle_int:#x} device={self._device_id}>"


@dataclass
class ContextOptions:
    """Options of `Device.create_context`: `resources`, the SM group (and workqueue) of the green context."""

    resources: DeviceResourcesType | None = None
