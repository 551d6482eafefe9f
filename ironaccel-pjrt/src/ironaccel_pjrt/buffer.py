"""`Buffer`: one `PJRT_Buffer` -- an array on a device, with its shape and dtype.

Made by `Client.buffer_from_host` (upload) or as an output of
`Executable.execute`.  `to_host()` copies it into a new numpy array or into a
given one; `block_until_ready()` awaits its readiness event; `delete()`
(alias `close()`) destroys it.  Every event it waits on is destroyed, every
PJRT_Error read and destroyed.  A buffer of a closed client or device, and any
use after `delete()`, raises `ClosedError` naming the call.
"""

from __future__ import annotations

import ctypes
from ctypes import c_int64
from typing import TYPE_CHECKING, Any

import numpy as np

from ironaccel.errors import ClosedError, DriverError, InvalidArgument, OutOfMemory
from ironaccel.types import DType

from . import capi
from .api import BACKEND

if TYPE_CHECKING:
    from .client import Client, DeviceInfo

__all__ = ["Buffer", "destroy_dropped", "DROPPED_BYTES", "DROPPED_MAX"]


_LAYOUTS: dict[int, tuple[Any, Any]] = {}
_DESTROY = capi.STRUCTS["PJRT_Buffer_Destroy_Args"]
_DESTROY_SIZE = _DESTROY.STRUCT_SIZE
#: Dropped buffers of at most this many bytes wait for the client's next launch to be destroyed; at most
#: DROPPED_MAX of them wait (so at most 2 MiB of device memory).
DROPPED_BYTES = 64 << 10
DROPPED_MAX = 32


def _row_major_layout(ndim: int) -> int:
    """Address of a dense row-major host layout (minor_to_major = ndim-1 .. 0), built once per rank."""
    made = _LAYOUTS.get(ndim)
    if made is None:
        minor_to_major = (c_int64 * max(ndim, 1))(*range(ndim - 1, -1, -1))
        layout = capi.MemoryLayout()
        layout.struct_size = capi.MemoryLayout.STRUCT_SIZE
        layout.type = capi.LAYOUT_TILED
        layout.tiled.struct_size = capi.LayoutTiled.STRUCT_SIZE
        layout.tiled.minor_to_major = ctypes.cast(minor_to_major, ctypes.POINTER(c_int64))
        layout.tiled.minor_to_major_size = ndim
        made = _LAYOUTS.setdefault(ndim, (layout, minor_to_major))  # never freed: read-only, shared
    return ctypes.addressof(made[0])


class Buffer:
    """An array on one PJRT device: `shape`, `dtype` (ironaccel DType), `size`, `nbytes`, `device`."""

    __slots__ = ("client", "device", "shape", "dtype", "_np_dtype", "_handle", "__weakref__")

    def __init__(self, client: Client, handle: int, device: DeviceInfo, shape: tuple[int, ...], dtype: DType,
                 np_dtype: np.dtype | None = None):
        self.client = client
        self.device = device
        self.shape = shape
        self.dtype = dtype
        self._np_dtype = np_dtype if np_dtype is not None else dtype.numpy
        self._handle: int | None = handle
        client._buffers.add(handle)

    # -- properties -----------------------------------------------------------

    @property
    def size(self) -> int:
        """The number of elements (the product of the shape; 1 for a scalar)."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        """Bytes of the buffer's data (size times the element size)."""
        return self.size * self._np_dtype.itemsize

    @property
    def ndim(self) -> int:
        """The number of dimensions of the buffer's shape."""
        return len(self.shape)

    @property
    def closed(self) -> bool:
        """Whether the buffer, or its client, is closed."""
        return self._handle is None or self.client._handle is None

    def handle(self, op: str) -> int:
        """The live PJRT_Buffer*, or ClosedError naming `op`."""
        handle = self._handle
        if handle is None or self.client._handle is None:
            what = "client" if self.client.closed else "buffer"
            raise ClosedError(BACKEND, op, what)
        return handle

    def __repr__(self) -> str:
        state = "deleted" if self._handle is None else f"on {self.device.kind} {self.device.id}"
        return f"<pjrt Buffer {self.dtype.value}{list(self.shape)} {state}>"

    # -- transfers and events --------------------------------------------------------

    def to_host(self, out: np.ndarray | None = None) -> np.ndarray:
        """Copy to a new numpy array of this shape, or into `out` (same dtype and element count, contiguous)."""
        op = "PJRT_Buffer_ToHostBuffer"
        handle = self.handle(op)
        if out is None:
            try:
                out = np.empty(self.shape, self._np_dtype)
            except MemoryError as exc:
                raise OutOfMemory(BACKEND, op, detail=f"no host memory for the {self.nbytes} bytes to download: "
                                  f"{exc}") from None
        else:
            if not isinstance(out, np.ndarray):
                raise InvalidArgument(BACKEND, op, detail=f"out must be a numpy array, got {type(out).__name__}")
            if out.dtype != self._np_dtype or out.size != self.size:
                raise InvalidArgument(BACKEND, op, detail=(
                    f"out is {out.dtype}[{out.size}] but the buffer is {self._np_dtype}[{self.size}]"))
            if not out.flags.c_contiguous or not out.flags.writeable:
                raise InvalidArgument(BACKEND, op, detail="out must be C-contiguous and writeable")
        client = self.client
        api = client.api
        if client.host_memcpy:
            # Everything that does not need the data is done before the wait: what follows the computation's
            # end, up to the next launch, is what the XLA CPU pool's idle workers are waiting through.
            nbytes = out.nbytes
            address = 0
            if nbytes:
                try:  # cheaper than out.ctypes.data
                    address = ctypes.addressof(ctypes.c_char.from_buffer(out))  # type: ignore[arg-type]
                except (TypeError, ValueError, BufferError):  # a dtype numpy exports no buffer of (bfloat16)
                    address = out.ctypes.data
            self._wait(handle)
            if nbytes:
                pointer = api.scratch("PJRT_Buffer_UnsafePointer")
                pointer.buffer = handle
                api.call("PJRT_Buffer_UnsafePointer", pointer)
                ctypes.memmove(address, pointer.buffer_pointer, nbytes)
            return out
        args = api.scratch(op)
        args.src = handle
        args.dst = out.ctypes.data
        args.dst_size = out.nbytes
        if client.explicit_host_layout:
            # Ask for row-major host data explicitly: a device layout (TPU tiling) may differ.
            args.host_layout = _row_major_layout(len(self.shape))
            try:
                api.call(op, args)
            except DriverError as exc:
                if exc.code_name not in ("UNIMPLEMENTED", "INVALID_ARGUMENT"):
                    raise
                client.explicit_host_layout = False  # this plugin copies in the buffer's own layout only
                args.host_layout = None
                api.call(op, args)
        else:
            args.host_layout = None
            api.call(op, args)
        api.await_event(op, args.event, client.spin)
        return out

    def block_until_ready(self) -> Buffer:
        """Wait for the computation or transfer that produces this buffer; raise its error if it failed."""
        handle = self._handle
        if handle is None or self.client._handle is None:
            handle = self.handle("PJRT_Buffer_ReadyEvent")  # raises
        self._wait(handle)
        return self

    def _wait(self, handle: int) -> None:
        """PJRT_Buffer_ReadyEvent of `handle`, awaited (see `PluginApi.await_event`)."""
        op = "PJRT_Buffer_ReadyEvent"
        client = self.client
        api = client.api
        args = api.scratch(op)
        args.buffer = handle
        error = (api._functions.get(op) or api.function(op))(ctypes.addressof(args))
        if error:
            raise api.take_error(op, error)
        api.await_event(op, args.event, client.spin)

    def is_ready(self) -> bool:
        """True when the buffer's contents are computed (or failed)."""
        op = "PJRT_Buffer_ReadyEvent"
        api = self.client.api
        args = api.args(op, buffer=self.handle(op))
        api.call(op, args)
        try:
            ready = api.args("PJRT_Event_IsReady_Args", event=args.event)
            api.call("PJRT_Event_IsReady", ready)
            return bool(ready.is_ready)
        finally:
            api.destroy_event(args.event)

    def on_device_size(self) -> int:
        """Bytes the buffer occupies on the device (may include padding)."""
        op = "PJRT_Buffer_OnDeviceSizeInBytes"
        args = self.client.api.args(op, buffer=self.handle(op))
        self.client.api.call(op, args)
        return int(args.on_device_size_in_bytes)

    def memory_kind(self) -> str:
        """The kind of memory space holding the buffer ("device", "pinned_host", ...)."""
        op = "PJRT_Buffer_Memory"
        api = self.client.api
        args = api.args(op, buffer=self.handle(op))
        api.call(op, args)
        return self.client.memory_kind(args.memory)

    def placement(self) -> DeviceInfo:
        """The device PJRT reports for this buffer (PJRT_Buffer_Device), as one of the client's devices."""
        op = "PJRT_Buffer_Device"
        api = self.client.api
        args = api.args(op, buffer=self.handle(op))
        api.call(op, args)
        return self.client.devices_of([args.device])[0]

    def copy_to(self, device: DeviceInfo) -> Buffer:
        """A copy of this buffer on another device of the same client."""
        op = "PJRT_Buffer_CopyToDevice"
        if getattr(device, "client", None) is not self.client:
            what = "belongs to another client" if hasattr(device, "client") else \
                f"must be a DeviceInfo of this client, got {type(device).__name__}"
            raise InvalidArgument(BACKEND, op, detail=f"target device {what}")
        api = self.client.api
        args = api.args(op, buffer=self.handle(op), dst_device=device.handle)
        api.call(op, args)
        return Buffer(self.client, args.dst_buffer, device, self.shape, self.dtype, self._np_dtype)

    # -- lifetime ------------------------------------------------------------

    def delete(self) -> None:
        """Destroy the buffer and free its device memory; a second call is a no-op."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        client = self.client
        try:
            client._buffers.remove(handle)  # whoever takes the handle out destroys it (close does too)
        except KeyError:
            return  # destroyed with its client
        # A fresh struct, not the thread's scratch one: delete also runs from __del__, which the
        # garbage collector may call in the middle of another delete on this thread.
        client.api.call("PJRT_Buffer_Destroy", _DESTROY(_DESTROY_SIZE, None, handle))

    close = delete

    def __del__(self) -> None:
        # A small buffer dropped without delete() is destroyed at the client's next launch, after the
        # Execute call (or once DROPPED_MAX are waiting, or at close): on the XLA CPU plugin the round trip's
        # inputs and output are dropped between one computation and the next launch, and their four destroys
        # kept the launch past the ~15 us a worker waits for work before it sleeps.
        try:
            handle = self._handle
            if handle is None:
                return
            size = self._np_dtype.itemsize
            for d in self.shape:
                size *= d
            if size > DROPPED_BYTES:
                self.delete()
                return
            self._handle = None
            client = self.client
            try:
                client._buffers.remove(handle)
            except KeyError:
                return  # destroyed with its client
            dropped = client._dropped
            dropped.append(handle)
            if len(dropped) > DROPPED_MAX:
                destroy_dropped(client)
        except Exception:
            pass


def destroy_dropped(client: Client) -> None:
    """Destroy the buffers `Buffer.__del__` left to `client` (each once: whoever pops a handle destroys it)."""
    dropped = client._dropped
    api = client.api
    destroy = api._functions.get("PJRT_Buffer_Destroy") or api.function("PJRT_Buffer_Destroy")
    args = _DESTROY(_DESTROY_SIZE, None, None)  # this call's own: a finalizer may run one inside another
    address = ctypes.addressof(args)
    while dropped:
        try:
            args.buffer = dropped.pop()
        except IndexError:  # another thread took the last one
            return
        error = destroy(address)
        if error:
            api.take_error("PJRT_Buffer_Destroy", error)  # read and destroyed; as from __del__, not raised
