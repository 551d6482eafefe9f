"""An in-memory backend: a test double for core's own tests and a reference for plugin authors.

It is never registered by entry point.  Register it explicitly::

    reg = BackendRegistry(discover=False)
    reg.register(ironaccel.testing.double)

Its "device" is host memory and its "code" is Python source defining
``main(*buffers, *params)`` that works on numpy arrays, so the whole
ComputeDevice contract runs without hardware.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ironaccel.compute import (
    BufferHandle,
    ComputeDeviceBase,
    Interface,
    PipelineHandle,
    Program,
    StorageBinding,
    Submission,
    pack_params,
)
from ironaccel.errors import CompileError, InvalidArgument
from ironaccel.hookspecs import hookimpl
from ironaccel.types import (
    BackendSpec,
    CapabilityFlags,
    ComputeTier,
    DeviceDescriptor,
    DeviceKind,
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


class MemoryBuffer(BufferHandle):
    __slots__ = ()


class MemoryPipeline(PipelineHandle):
    __slots__ = ()


class MemorySubmission(Submission):
    __slots__ = ()


class MemoryProgram(Program):
    def __init__(self, fn: Any, buffers: int, params: int, interface: Interface):
        super().__init__(buffers, params, interface)
        self.fn = fn


#: Annotations a kernel's buffer arguments may carry, as the element types it declares.
_DECLARED = {d.value: d for d in DType}


class MemoryDevice(ComputeDeviceBase):
    """ComputeDevice over host memory; executes synchronously.

    The smallest complete backend on the compute kit: each method below is one
    of the vendor calls `ComputeDeviceBase` asks for.  A kernel's buffer
    arguments may be annotated with an element type (``x: "float32"``), which
    dispatch then checks, like the storage-buffer types of WGSL, GLSL and SPIR-V.
    """

    backend = NAME
    language = "Python"
    buffer_type = MemoryBuffer
    pipeline_type = MemoryPipeline
    submission_type = MemorySubmission
    buffer_limit_name = "the double's limit"
    group_limit_name = "the double's limit"

    def __init__(self, descriptor: DeviceDescriptor):
        self._open(descriptor, max_buffer_bytes=MAX_BYTES, group_limits=(MAX_GROUPS,) * 3)

    def _create_buffer(self, nbytes: int, dtype: DType, data: np.ndarray | None) -> np.ndarray:
        memory = np.empty(nbytes, np.uint8)
        if data is not None:
            memory[:] = data
        return memory.view(dtype.numpy)

    def _free_buffer(self, handle: np.ndarray) -> None:
        pass  # host memory: the garbage collector frees it

    def _write(self, handle: np.ndarray, data: np.ndarray) -> None:
        handle.view(np.uint8)[: data.size] = data

    def _read(self, handle: np.ndarray, out: np.ndarray) -> None:
        out[:] = handle.view(np.uint8)[: out.size]

    def _build(self, code: str, entry: str, buffers: int, params: int,
               workgroup_size: tuple[int, int, int]) -> MemoryProgram:
        namespace: dict[str, Any] = {"np": np}
        try:
            exec(compile(code, "<kernel>", "exec", dont_inherit=True), namespace)
            fn = namespace[entry]
        except (SyntaxError, KeyError) as exc:
            raise CompileError(NAME, "compile", log=f"{type(exc).__name__}: {exc}") from None
        names = fn.__code__.co_varnames[: fn.__code__.co_argcount]
        if len(names) != buffers + params:
            raise InvalidArgument(NAME, "pipeline", detail=f"{entry} takes {len(names)} arguments, not "
                                  f"{buffers} buffers + {params} params")
        notes = getattr(fn, "__annotations__", {})
        declared = [StorageBinding(i, _DECLARED.get(str(notes.get(name))), True) for i, name in
                    enumerate(names[:buffers])]
        return MemoryProgram(fn, buffers, params, Interface.of(buffers, declared))

    def _pack(self, program: Program, params: Any) -> tuple[Any, ...]:
        pack_params(NAME, params, program.params)  # the kit's rules, though the double passes values
        return tuple(params)

    def _launch(self, program: MemoryProgram, handles: list[np.ndarray], dims: tuple[int, int, int],
                params: tuple[Any, ...]) -> int:
        program.fn(*handles, *params)
        self._submitted += 1
        self._completed = self._submitted
        return self._submitted

    def _wait(self, serial: int, seconds: float | None) -> bool:
        return True

    def _shutdown(self) -> None:
        pass


SCALE_OFFSET = """
def main(x: "float32", y: "float32", a, b, n):
    y[:n] = x[:n] * a + b
"""
BROKEN = "def main(x, y, a, b, n):\n    y[:n] = = x\n"
