"""An opened HIP device: streams, events, memory, modules and kernel launch, on hip-python.

Every call selects the device first (hipSetDevice: HIP's current device is per thread) and goes through
`binding.call`, so a failure is a typed error naming the HIP call and its code.  Objects belong to the
device that made them: one of another device, or one already closed, is refused before HIP sees it.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ironaccel.errors import ClosedError, InvalidArgument
from ironaccel.types import DeviceDescriptor

from .binding import BACKEND, call
from .codeobject import KernelArg, kernel_args
from .launch import OP, pack

__all__ = ["HipDevice", "Stream", "Event", "DeviceMemory", "PinnedMemory", "Module", "Function"]


def _invalid(op: str, detail: str) -> InvalidArgument:
    return InvalidArgument(BACKEND, op, detail=detail)


def _size(op: str, nbytes: Any) -> int:
    if type(nbytes) is not int or nbytes <= 0:
        raise _invalid(op, f"size must be a positive int (bytes), got {nbytes!r}")
    return nbytes


def _host(op: str, array: Any) -> np.ndarray:
    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
        raise _invalid(op, f"expected a C-contiguous numpy array, got {type(array).__name__}")
    return array


class _Owned:
    """Something a HipDevice made: closed once, refused after, refused on another device."""

    _handle: Any = None
    _what = "object"

    def __init__(self, device: HipDevice):
        self.device = device
        device._objects.add(self)

    @property
    def closed(self) -> bool:
        return self._handle is None or self.device.closed

    def _live(self, op: str) -> Any:
        if self._handle is None:
            raise ClosedError(BACKEND, op, self._what)
        self.device._select(op)
        return self._handle

    def _check_mine(self, other: Any, kind: type[_Owned], op: str) -> None:
        if not isinstance(other, kind):
            raise _invalid(op, f"expected a {kind.__name__}, got {type(other).__name__}")
        if other.device is not self.device:
            raise _invalid(op, f"the {kind.__name__} belongs to another device ({other.device!r})")
        if other._handle is None:
            raise ClosedError(BACKEND, op, other._what)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()  # type: ignore[attr-defined]

    def __del__(self) -> None:
        """A dropped object frees its HIP handle (the device's close() frees what is still alive)."""
        if getattr(self, "_handle", None) is not None:
            try:
                self.close()  # type: ignore[attr-defined]
            except Exception:  # at interpreter exit the runtime may be gone
                pass


class Stream(_Owned):
    """A HIP stream (hipStreamCreateWithPriority): work on it runs in order."""

    _what = "stream"

    def __init__(self, device: HipDevice, priority: int):
        super().__init__(device)
        hip = device._hip
        device._select("hipStreamCreateWithPriority")
        least, greatest = call(hip.hipDeviceGetStreamPriorityRange, "hipDeviceGetStreamPriorityRange")
        if type(priority) is not int:
            raise _invalid("hipStreamCreateWithPriority", f"priority must be an int, got {priority!r}")
        self._handle = call(hip.hipStreamCreateWithPriority, "hipStreamCreateWithPriority", 0,
                            max(int(greatest), min(priority, int(least))))

    @property
    def priority(self) -> int:
        return int(call(self.device._hip.hipStreamGetPriority, "hipStreamGetPriority",
                        self._live("hipStreamGetPriority")))

    def query(self) -> bool:
        """True when all work on the stream is done (hipStreamQuery)."""
        handle = self._live("hipStreamQuery")
        err = self.device._hip.hipStreamQuery(handle)[0]
        if int(getattr(err, "value", err)) == 600:  # hipErrorNotReady: still running
            return False
        call(lambda: (err,), "hipStreamQuery")
        return True

    def synchronize(self) -> None:
        call(self.device._hip.hipStreamSynchronize, "hipStreamSynchronize", self._live("hipStreamSynchronize"))

    def wait(self, event: Event) -> None:
        """Later work on this stream waits for `event` (hipStreamWaitEvent)."""
        handle = self._live("hipStreamWaitEvent")
        self._check_mine(event, Event, "hipStreamWaitEvent")
        call(self.device._hip.hipStreamWaitEvent, "hipStreamWaitEvent", handle, event._handle, 0)

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None and not self.device.closed:
            self.device._select("hipStreamDestroy")
            call(self.device._hip.hipStreamDestroy, "hipStreamDestroy", handle)


class Event(_Owned):
    """A HIP event: recorded on a stream, waited on, and timed against another (hipEventElapsedTime)."""

    _what = "event"

    def __init__(self, device: HipDevice):
        super().__init__(device)
        device._select("hipEventCreateWithFlags")
        self._handle = call(device._hip.hipEventCreateWithFlags, "hipEventCreateWithFlags", 0)

    def record(self, stream: Stream | None = None) -> Event:
        handle = self._live("hipEventRecord")
        call(self.device._hip.hipEventRecord, "hipEventRecord", handle, self.device._stream(stream, "hipEventRecord"))
        return self

    def query(self) -> bool:
        handle = self._live("hipEventQuery")
        err = self.device._hip.hipEventQuery(handle)[0]
        if int(getattr(err, "value", err)) == 600:
            return False
        call(lambda: (err,), "hipEventQuery")
        return True

    def synchronize(self) -> None:
        call(self.device._hip.hipEventSynchronize, "hipEventSynchronize", self._live("hipEventSynchronize"))

    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds from this event to `end`, both recorded (hipEventElapsedTime)."""
        handle = self._live("hipEventElapsedTime")
        self._check_mine(end, Event, "hipEventElapsedTime")
        return float(call(self.device._hip.hipEventElapsedTime, "hipEventElapsedTime", handle, end._handle))

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None and not self.device.closed:
            self.device._select("hipEventDestroy")
            call(self.device._hip.hipEventDestroy, "hipEventDestroy", handle)


class DeviceMemory(_Owned):
    """`nbytes` of device memory (hipMalloc, or hipMallocAsync on a stream: freed in that stream's order)."""

    _what = "memory"

    def __init__(self, device: HipDevice, nbytes: int, stream: Stream | None):
        super().__init__(device)
        self.nbytes = _size("hipMalloc", nbytes)
        self._stream_of = stream
        if stream is None:
            device._select("hipMalloc")
            self._handle = int(call(device._hip.hipMalloc, "hipMalloc", nbytes))
        else:
            s = device._stream(stream, "hipMallocAsync")
            self._handle = int(call(device._hip.hipMallocAsync, "hipMallocAsync", nbytes, s))

    @property
    def ptr(self) -> int:
        return int(self._live("DeviceMemory.ptr"))

    def _range(self, op: str, nbytes: int, offset: int = 0) -> int:
        if type(offset) is not int or offset < 0 or nbytes + offset > self.nbytes:
            raise _invalid(op, f"{nbytes} bytes at offset {offset!r} do not fit in {self.nbytes} bytes")
        return int(self._live(op)) + offset

    def copy_from(self, host: Any, stream: Stream | None = None, offset: int = 0) -> None:
        """Copy a host array (or PinnedMemory) into this memory at `offset` (hipMemcpyHtoD[Async])."""
        src = host.array if isinstance(host, PinnedMemory) else _host("hipMemcpyHtoD", host)
        op = "hipMemcpyHtoD" if stream is None else "hipMemcpyHtoDAsync"
        dst = self._range(op, src.nbytes, offset)
        if src.nbytes == 0:
            return
        if stream is None:
            call(self.device._hip.hipMemcpyHtoD, op, dst, src.ctypes.data, src.nbytes)
        else:
            call(self.device._hip.hipMemcpyHtoDAsync, op, dst, src.ctypes.data, src.nbytes,
                 self.device._stream(stream, op))

    def copy_to(self, host: Any, stream: Stream | None = None, offset: int = 0) -> None:
        """Copy this memory from `offset` into a host array (or PinnedMemory) (hipMemcpyDtoH[Async])."""
        dst = host.array if isinstance(host, PinnedMemory) else _host("hipMemcpyDtoH", host)
        op = "hipMemcpyDtoH" if stream is None else "hipMemcpyDtoHAsync"
        src = self._range(op, dst.nbytes, offset)
        if dst.nbytes == 0:
            return
        if stream is None:
            call(self.device._hip.hipMemcpyDtoH, op, dst.ctypes.data, src, dst.nbytes)
        else:
            call(self.device._hip.hipMemcpyDtoHAsync, op, dst.ctypes.data, src, dst.nbytes,
                 self.device._stream(stream, op))

    def copy_to_device(self, other: DeviceMemory, nbytes: int | None = None, stream: Stream | None = None) -> None:
        """Copy `nbytes` (default: all of this) into `other` on the same device (hipMemcpyDtoD[Async])."""
        op = "hipMemcpyDtoD" if stream is None else "hipMemcpyDtoDAsync"
        self._check_mine(other, DeviceMemory, op)
        n = self.nbytes if nbytes is None else _size(op, nbytes)
        src, dst = self._range(op, n), other._range(op, n)
        if stream is None:
            call(self.device._hip.hipMemcpyDtoD, op, dst, src, n)
        else:
            call(self.device._hip.hipMemcpyDtoDAsync, op, dst, src, n, self.device._stream(stream, op))

    def memset(self, value: int, nbytes: int | None = None, stream: Stream | None = None) -> None:
        """Set `nbytes` (default: all) to the byte `value` (hipMemsetD8[Async])."""
        op = "hipMemsetD8" if stream is None else "hipMemsetD8Async"
        if type(value) is not int or not 0 <= value <= 255:
            raise _invalid(op, f"value must be a byte (0..255), got {value!r}")
        n = self.nbytes if nbytes is None else _size(op, nbytes)
        dst = self._range(op, n)
        if stream is None:
            call(self.device._hip.hipMemsetD8, op, dst, value, n)
        else:
            call(self.device._hip.hipMemsetD8Async, op, dst, value, n, self.device._stream(stream, op))

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is None or self.device.closed:
            return
        stream = self._stream_of
        if stream is not None and stream._handle is not None:
            self.device._select("hipFreeAsync")
            call(self.device._hip.hipFreeAsync, "hipFreeAsync", handle, stream._handle)
        else:
            self.device._select("hipFree")
            call(self.device._hip.hipFree, "hipFree", handle)


class PinnedMemory(_Owned):
    """Page-locked host memory (hipHostMalloc), seen as a numpy uint8 `array` for its life."""

    _what = "pinned memory"

    def __init__(self, device: HipDevice, nbytes: int):
        super().__init__(device)
        self.nbytes = _size("hipHostMalloc", nbytes)
        device._select("hipHostMalloc")
        self._handle = int(call(device._hip.hipHostMalloc, "hipHostMalloc", nbytes, 0))
        self._array = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(self._handle))

    @property
    def ptr(self) -> int:
        """The address; kernels take it as a device pointer (hipHostMalloc memory is mapped, unified addressing)."""
        return int(self._live("PinnedMemory.ptr"))

    @property
    def array(self) -> np.ndarray:
        if self._handle is None:
            raise ClosedError(BACKEND, "PinnedMemory.array", self._what)
        return self._array

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None and not self.device.closed:
            self.device._select("hipHostFree")
            call(self.device._hip.hipHostFree, "hipHostFree", handle)


class Module(_Owned):
    """A code object loaded on the device (hipModuleLoadData): its kernels and globals."""

    _what = "module"

    def __init__(self, device: HipDevice, image: Any):
        super().__init__(device)
        op = "hipModuleLoadData"
        if not isinstance(image, (bytes, bytearray, memoryview)) or len(image) < 64 or bytes(image[:4]) != b"\x7fELF":
            raise _invalid(op, "expected an AMDGPU code object (ELF bytes, e.g. Program(...).compile()), got "
                           f"{type(image).__name__}")
        self._image = bytes(image)
        self._args = kernel_args(self._image)
        device._select(op)
        self._handle = call(device._hip.hipModuleLoadData, op, self._image)

    def function(self, name: str) -> Function:
        """The kernel `name` (hipModuleGetFunction); its arguments are checked against the code object."""
        op = "hipModuleGetFunction"
        if not isinstance(name, str) or not name or "\0" in name:
            raise _invalid(op, f"name must be a kernel's name, got {name!r}")
        handle = call(self.device._hip.hipModuleGetFunction, op, self._live(op), name.encode())
        return Function(self, name, handle, self._args.get(name))

    def global_(self, name: str) -> tuple[int, int]:
        """(device address, size in bytes) of the module's global `name` (hipModuleGetGlobal)."""
        op = "hipModuleGetGlobal"
        if not isinstance(name, str) or not name or "\0" in name:
            raise _invalid(op, f"name must be a global's name, got {name!r}")
        ptr, size = call(self.device._hip.hipModuleGetGlobal, op, self._live(op), name.encode())
        return int(ptr), int(size)

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None and not self.device.closed:
            self.device._select("hipModuleUnload")
            call(self.device._hip.hipModuleUnload, "hipModuleUnload", handle)


class Function:
    """A kernel of a Module; `launch` packs its arguments by the metadata's layout (see launch.py)."""

    def __init__(self, module: Module, name: str, handle: Any, layout: tuple[KernelArg, ...] | None):
        self.module, self.name, self._handle, self.layout = module, name, handle, layout

    def launch(self, grid: Sequence[int] | int, block: Sequence[int] | int, *args: Any, stream: Stream | None = None,
               shared: int = 0) -> None:
        """Queue the kernel over `grid` blocks of `block` threads (hipModuleLaunchKernel)."""

        device = self.module.device
        self.module._live(OP)
        g, b = _dims(grid, "grid"), _dims(block, "block")
        if type(shared) is not int or shared < 0:
            raise _invalid(OP, f"shared must be a non-negative int (bytes), got {shared!r}")
        if self.layout is None:
            raise _invalid(OP, f"the code object has no argument metadata for kernel {self.name!r}")
        packed = pack(self.layout, args, self.name, device, DeviceMemory)
        call(device._hip.hipModuleLaunchKernel, OP, self._handle, *g, *b, shared, device._stream(stream, OP),
             packed.address, None)


def _dims(value: Any, what: str) -> tuple[int, int, int]:
    dims = (value,) if type(value) is int else tuple(value) if isinstance(value, (tuple, list)) else None
    if dims is None or not 1 <= len(dims) <= 3 or any(type(d) is not int or not 0 < d < 2**31 for d in dims):
        raise _invalid("hipModuleLaunchKernel", f"{what} must be 1 to 3 positive ints, got {value!r}")
    return (*dims, 1, 1)[:3]  # type: ignore[return-value]


class HipDevice:
    """Device `descriptor.ordinal` of the HIP runtime."""

    def __init__(self, hip: ModuleType, descriptor: DeviceDescriptor):
        if not isinstance(hip, ModuleType) or not isinstance(descriptor, DeviceDescriptor):
            raise InvalidArgument(BACKEND, "hipSetDevice", detail=(
                "HipDevice takes hip-python's hip module and a DeviceDescriptor (get one from "
                f"Backend().open(ordinal)), got {type(hip).__name__} and {type(descriptor).__name__}"))
        if descriptor.backend != BACKEND:
            raise InvalidArgument(BACKEND, "hipSetDevice", detail=(
                f"the descriptor is of backend {descriptor.backend!r}, not {BACKEND!r}"))
        self.descriptor = descriptor
        self._hip = hip
        self._closed = False
        self._lock = threading.Lock()
        #: What this device made and has not closed: close() frees it (modules last, streams after memory).
        self._objects: weakref.WeakSet[_Owned] = weakref.WeakSet()
        self._select("hipSetDevice")

    @property
    def ordinal(self) -> int:
        """The HIP device ordinal this object selects."""
        return self.descriptor.ordinal

    @property
    def closed(self) -> bool:
        """Whether `close()` was called."""
        return self._closed

    def _select(self, op: str) -> None:
        if self._closed:
            raise ClosedError(BACKEND, op, "device")
        call(self._hip.hipSetDevice, "hipSetDevice", self.ordinal)

    def _stream(self, stream: Stream | None, op: str) -> Any:
        """The HIP handle of `stream` (None: the null stream), after the device and ownership checks."""
        self._select(op)
        if stream is None:
            return None
        if not isinstance(stream, Stream):
            raise _invalid(op, f"stream must be a Stream of this device or None, got {type(stream).__name__}")
        if stream.device is not self:
            raise _invalid(op, f"the stream belongs to another device ({stream.device!r})")
        if stream._handle is None:
            raise ClosedError(BACKEND, op, "stream")
        return stream._handle

    def synchronize(self) -> None:
        """Wait for all work on this device (hipDeviceSynchronize)."""
        with self._lock:
            self._select("hipDeviceSynchronize")
            call(self._hip.hipDeviceSynchronize, "hipDeviceSynchronize")

    def stream(self, priority: int = 0) -> Stream:
        """A new stream; `priority` is clamped to the device's range (lower is more urgent, as in HIP)."""
        return Stream(self, priority)

    def event(self) -> Event:
        """A new HIP event of this device."""
        return Event(self)

    def alloc(self, nbytes: int, stream: Stream | None = None) -> DeviceMemory:
        """`nbytes` of device memory; with `stream`, stream-ordered (hipMallocAsync)."""
        return DeviceMemory(self, nbytes, stream)

    def pinned(self, nbytes: int) -> PinnedMemory:
        """`nbytes` of page-locked host memory (hipHostMalloc) for fast copies."""
        return PinnedMemory(self, nbytes)

    def load_module(self, image: Any) -> Module:
        """Load a code object (bytes from `Program(...).compile()`)."""
        return Module(self, image)

    def close(self) -> None:
        """Free what it made (events, memory, then streams and modules) and forget the device; twice is a no-op.
        The primary context stays with the runtime."""
        if self._closed:
            return
        order = (Event, DeviceMemory, PinnedMemory, Stream, Module)
        for kind in order:
            for obj in [o for o in list(self._objects) if isinstance(o, kind)]:
                try:
                    obj.close()  # type: ignore[attr-defined]
                except Exception:  # a failing free must not keep the rest alive
                    pass
        self._closed = True

    def __enter__(self) -> HipDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<HipDevice {self.ordinal} {self.descriptor.name!r} {state}>"
