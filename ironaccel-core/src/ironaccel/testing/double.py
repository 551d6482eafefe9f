"""An in-memory backend: a test double for core's own tests and a reference for plugin authors.

It is never registered by entry point.  Register it explicitly::

    reg = BackendRegistry(discover=False)
    reg.register(ironaccel.testing.double)

Its "device" is host memory and its "code" is Python source defining
``main(*buffers, *params)`` that works on numpy arrays, so the whole
ComputeDevice contract runs without hardware.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ironaccel.errors import ClosedError, CompileError, InvalidArgument
from ironaccel.hookspecs import hookimpl
from ironaccel.types import (
    BackendSpec,
    CapabilityFlags,
    ComputeTier,
    DeviceDescriptor,
    DeviceKind,
    Dim3,
    DType,
    ProbeResult,
    Vendor,
)

NAME = "memory"
MAX_GROUPS = 65535
MAX_BYTES = 1 << 32


@hookimpl
def ironaccel_backends() -> list[BackendSpec]:
    return [BackendSpec(NAME, factory=MemoryBackend, summary="in-memory test double", vendor=Vendor.UNKNOWN,
                        kinds=(DeviceKind.CPU,))]


class MemoryBackend:
    name = NAME

    def __init__(self, devices: int = 2):
        self._count = devices

    def probe(self) -> ProbeResult:
        return ProbeResult(NAME, True, reason="host memory", device_count=self._count)

    def devices(self) -> list[DeviceDescriptor]:
        return [
            DeviceDescriptor(NAME, i, f"memory{i}", Vendor.UNKNOWN, DeviceKind.CPU, MAX_BYTES, ComputeTier.SOFTWARE,
                             CapabilityFlags.FP64 | CapabilityFlags.INT8)
            for i in range(self._count)
        ]

    def open(self, ordinal: int = 0) -> MemoryDevice:
        if not isinstance(ordinal, int) or not 0 <= ordinal < self._count:
            raise InvalidArgument(NAME, "open", detail=f"ordinal {ordinal!r} out of range 0..{self._count - 1}")
        return MemoryDevice(self.devices()[ordinal])


class MemoryBuffer:
    def __init__(self, device: MemoryDevice, data: np.ndarray):
        self.device = device
        self.data: np.ndarray | None = data
        self.dtype = DType.of(data.dtype)
        self.size = data.size
        self.nbytes = data.nbytes

    def close(self) -> None:
        self.data = None


class MemoryPipeline:
    def __init__(self, fn: Any, entry: str, buffers: int, params: int):
        self.fn, self.entry, self.buffers, self.params = fn, entry, buffers, params

    def close(self) -> None:
        pass


class Done:
    def wait(self, timeout: float | None = None) -> None:
        pass

    def done(self) -> bool:
        return True


class MemoryDevice:
    """ComputeDevice over host memory; executes synchronously."""

    def __init__(self, descriptor: DeviceDescriptor):
        self.descriptor = descriptor
        self._closed = False

    def _check_open(self, op: str) -> None:
        if self._closed:
            raise ClosedError(NAME, op, "device")

    def _own(self, buf: Any, op: str) -> np.ndarray:
        if not isinstance(buf, MemoryBuffer) or buf.device is not self:
            raise InvalidArgument(NAME, op, detail="buffer belongs to another device")
        if buf.data is None:
            raise ClosedError(NAME, op, "buffer")
        return buf.data

    def upload(self, array: Any) -> MemoryBuffer:
        self._check_open("upload")
        array = np.asarray(array)
        if not array.flags.c_contiguous:
            raise InvalidArgument(NAME, "upload", detail="array is not C-contiguous")
        return MemoryBuffer(self, array.ravel().copy())

    def alloc(self, size: int, dtype: Any = "float32") -> MemoryBuffer:
        self._check_open("alloc")
        dt = DType.of(dtype)
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
            raise InvalidArgument(NAME, "alloc", detail=f"size must be an int, got {size!r}")
        if not 0 < size * dt.itemsize <= MAX_BYTES:
            raise InvalidArgument(NAME, "alloc", detail=f"size {size} out of range")
        return MemoryBuffer(self, np.empty(int(size), dt.numpy))

    def write(self, buffer: MemoryBuffer, array: Any) -> None:
        self._check_open("write")
        data = self._own(buffer, "write")
        array = np.asarray(array)
        if not array.flags.c_contiguous:
            raise InvalidArgument(NAME, "write", detail="array is not C-contiguous")
        if array.nbytes > data.nbytes:
            raise InvalidArgument(NAME, "write", detail=f"{array.nbytes} bytes into a buffer of {data.nbytes}")
        data.view(np.uint8)[: array.nbytes] = array.reshape(-1).view(np.uint8)

    def download(self, buffer: MemoryBuffer, out: Any = None) -> np.ndarray:
        self._check_open("download")
        data = self._own(buffer, "download")
        if out is None:
            return data.copy()
        if not out.flags.c_contiguous:
            raise InvalidArgument(NAME, "download", detail="out is not C-contiguous")
        if out.nbytes > data.nbytes:
            raise InvalidArgument(NAME, "download", detail=f"out holds {out.nbytes} bytes, buffer {data.nbytes}")
        out.reshape(-1).view(np.uint8)[:] = data.view(np.uint8)[: out.nbytes]
        return out

    def pipeline(self, code: Any, entry: str = "main", *, buffers: int, params: int = 0,
                 workgroup_size: tuple[int, int, int] = (64, 1, 1)) -> MemoryPipeline:
        self._check_open("pipeline")
        namespace: dict[str, Any] = {"np": np}
        try:
            exec(compile(str(code), "<kernel>", "exec"), namespace)
            fn = namespace[entry]
        except (SyntaxError, KeyError) as exc:
            raise CompileError(NAME, "compile", log=f"{type(exc).__name__}: {exc}") from None
        return MemoryPipeline(fn, entry, buffers, params)

    def dispatch(self, pipeline: MemoryPipeline, buffers: Sequence[MemoryBuffer], groups: Any,
                 params: Sequence[Any] = ()) -> Done:
        self._check_open("dispatch")
        try:
            dims = Dim3.of(groups)
        except ValueError as exc:
            raise InvalidArgument(NAME, "dispatch", detail=str(exc)) from None
        if max(dims) > MAX_GROUPS:
            raise InvalidArgument(NAME, "dispatch", detail=f"groups {tuple(dims)} over the limit {MAX_GROUPS}")
        if len(buffers) != pipeline.buffers or len(params) != pipeline.params:
            raise InvalidArgument(NAME, "dispatch", detail=f"pipeline takes {pipeline.buffers} buffers and "
                                  f"{pipeline.params} params, got {len(buffers)} and {len(params)}")
        arrays = [self._own(b, "dispatch") for b in buffers]
        pipeline.fn(*arrays, *params)
        return Done()

    def synchronize(self) -> None:
        self._check_open("synchronize")

    def close(self) -> None:
        self._closed = True


SCALE_OFFSET = """
def main(x, y, a, b, n):
    y[:n] = x[:n] * a + b
"""
BROKEN = "def main(x, y, a, b, n):\n    y[:n] = = x\n"
