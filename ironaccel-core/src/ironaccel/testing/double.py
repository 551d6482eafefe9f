"""An in-memory backend: a test double for core's own tests and a reference for plugin authors.

It is never registered by entry point.  Register it explicitly::

    reg = BackendRegistry(discover=False)
    reg.register(ironaccel.testing.double)

Its "device" is host memory and its "code" is Python source defining
``main(*buffers, *params)`` that works on numpy arrays, so the whole
ComputeDevice contract runs without hardware.

It has every feature of the execution model, so the conformance kit's tests of
it run here, and it shows a plugin author each vendor call:

* a kernel's source may declare ``PARAMS = {"a": "float32", "pair": ("float32", 2), ...}`` (a C-layout params
  block, passed to ``main`` by keyword) and ``CONSTANTS = {"SCALE": 1.0}`` (specialization constants with their
  defaults, read by the code as globals);
* queues are counters (work runs at once, in order); fences are 64-bit counters in a memfd page, so they
  export and import as fds; batches replay their commands and time each one with the host clock;
* "device" memory is not host-visible (as on a GPU), "host" memory is mapped for its life, "upload" and
  "readback" map by copy and cannot be bound; exportable memory lives in a memfd and imports zero-copy.
"""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Sequence
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
from ironaccel.compute.execution import FEATURES, MEMORY_KINDS, Command, ExternalMemory
from ironaccel.compute.params import Array, ConstantInfo, ParamBlock, Scalar, Vector, layout_struct
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
                             CapabilityFlags.FP64 | CapabilityFlags.INT8 | CapabilityFlags.TIMESTAMPS)
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
        #: The numpy dtype that unpacks a typed params block (None: params are passed as given, in order).
        self.unpack: np.dtype | None = None


class _Queue:
    """A queue of the double: work runs at once, so its serials finish as they are given."""

    def __init__(self) -> None:
        self.serial = 0


class _Fence:
    """A 64-bit counter in a memfd page: shared with whoever maps the same fd (an imported fence)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.page = mmap.mmap(fd, 8)
        self.word = np.frombuffer(self.page, np.uint64)

    @classmethod
    def new(cls, value: int) -> _Fence:
        fd = os.memfd_create("ironaccel-double-fence")
        os.ftruncate(fd, 8)
        fence = cls(fd)
        fence.word[0] = value
        return fence

    def close(self) -> None:
        del self.word
        self.page.close()
        os.close(self.fd)


def _block_of(spec: Any) -> ParamBlock:
    """A C-layout block from a kernel's PARAMS: name -> dtype name, or (dtype name, count) for a vector/array."""
    if not isinstance(spec, dict):
        raise TypeError("PARAMS must be a dict of name -> dtype or (dtype, count)")
    members: list[tuple[str, Any]] = []
    for name, kind in spec.items():
        if isinstance(kind, tuple):
            element = Scalar(DType.of(kind[0]))
            members.append((name, Vector(element.dtype, kind[1]) if 2 <= kind[1] <= 4 else
                            Array(element, kind[1], element.size)))
        else:
            members.append((name, Scalar(DType.of(kind))))
    return ParamBlock(layout_struct("PARAMS", members, "c"), "c")


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
    execution_features = frozenset(FEATURES)
    supported_memory = MEMORY_KINDS
    bindable_memory = ("device", "host")
    #: How many queues the double offers (the default one included).
    MAX_QUEUES = 4

    def __init__(self, descriptor: DeviceDescriptor):
        #: Memory kind and whether it lives in a memfd, by the id of its vendor array.
        self._kinds: dict[int, tuple[str, Any]] = {}
        self._open(descriptor, max_buffer_bytes=MAX_BYTES, group_limits=(MAX_GROUPS,) * 3)

    def _create_buffer(self, nbytes: int, dtype: DType, data: np.ndarray | None) -> np.ndarray:
        memory = np.empty(nbytes, np.uint8)
        if data is not None:
            memory[:] = data
        return memory.view(dtype.numpy)

    def _free_buffer(self, handle: np.ndarray) -> None:
        kind = self._kinds.pop(id(handle), None)  # host memory: the garbage collector frees it
        if kind is not None and kind[1] is not None:
            kind[1].close()  # the memfd: importers keep their own mappings

    # -- memory kinds, mapping, external memory ------------------------------------------------------------

    def _create_memory(self, nbytes: int, dtype: DType, memory: str, exportable: bool) -> np.ndarray:
        shared = None
        if exportable:
            fd = os.memfd_create("ironaccel-double-memory")
            os.ftruncate(fd, nbytes)
            shared = _Shared(fd, nbytes)
            handle = np.frombuffer(shared.map, np.uint8).view(dtype.numpy)
        else:
            handle = np.zeros(nbytes, np.uint8).view(dtype.numpy)
        self._kinds[id(handle)] = (memory, shared)
        return handle

    def _memory_of(self, handle: np.ndarray) -> tuple[bool, bool]:
        kind = self._kinds.get(id(handle), ("device", None))[0]
        return kind != "device", kind == "host"

    def _map(self, handle: np.ndarray, write: bool) -> Any:
        if self._kinds[id(handle)][0] == "host":
            return handle.ctypes.data  # mapped for the buffer's life
        return handle.view(np.uint8).copy()  # staging memory maps by copy, as on WebGPU

    def _unmap(self, handle: np.ndarray, array: np.ndarray | None, write: bool) -> None:
        if array is not None and write:
            handle.view(np.uint8)[:] = array.view(np.uint8)

    def _export_memory(self, handle: np.ndarray) -> tuple[int, int]:
        shared = self._kinds[id(handle)][1]
        return os.dup(shared.fd), shared.size

    def _import_memory(self, fd: int, nbytes: int, dtype: DType, ext: ExternalMemory) -> np.ndarray:
        shared = _Shared(fd, nbytes)
        handle = np.frombuffer(shared.map, np.uint8).view(dtype.numpy)
        self._kinds[id(handle)] = ("device", shared)
        return handle

    # -- queues and fences -----------------------------------------------------------------------------

    def _queue_limit(self) -> int:
        return self.MAX_QUEUES

    def _create_queue(self, priority: int) -> tuple[_Queue, int]:
        return _Queue(), max(-1, min(priority, 1))  # three priorities, as CUDA on most GPUs

    def _launch_on(self, vq: Any, program: Any, handles: list[Any], dims: tuple[int, int, int], params: Any) -> int:
        if vq is None:
            return self._launch(program, handles, dims, params)
        self._run(program, handles, params)
        vq.serial += 1
        return int(vq.serial)

    def _wait_on(self, vq: Any, serial: int, seconds: float | None) -> bool:
        return True

    def _last_serial(self, vq: Any) -> int:
        return self._submitted if vq is None else int(vq.serial)

    def _create_fence(self, value: int, exportable: bool) -> _Fence:
        return _Fence.new(value)

    def _destroy_fence(self, vf: _Fence) -> None:
        vf.close()

    def _fence_value(self, vf: _Fence) -> int:
        return int(vf.word[0])

    def _fence_wait(self, vf: _Fence, value: int, seconds: float | None) -> bool:
        deadline = None if seconds is None else time.monotonic() + seconds
        while int(vf.word[0]) < value:  # only another process (an importer) can still signal it
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.0005)
        return True

    def _signal(self, vq: Any, vf: _Fence, value: int) -> None:
        vf.word[0] = value  # the queue's earlier work has run already

    def _wait_fence(self, vq: Any, vf: _Fence, value: int) -> None:
        pass  # work runs at submission, after everything that signalled before it

    def _export_fence(self, vf: _Fence) -> int:
        return os.dup(vf.fd)

    def _import_fence(self, fd: int) -> _Fence:
        return _Fence(fd)

    # -- batches ------------------------------------------------------------------------------------------

    def _record(self, commands: Sequence[Command], timestamps: bool) -> dict[str, Any]:
        return {"commands": commands, "spans": {}, "reads": {}}

    def _update(self, rec: dict[str, Any], index: int, command: Command) -> bool:
        return True  # a replay reads each command's fields as they are at submit

    def _submit(self, vq: Any, rec: dict[str, Any], waits: list[tuple[Any, int]],
                signals: list[tuple[Any, int]]) -> int:
        spans, reads = [], []
        for command in rec["commands"]:
            start = time.perf_counter_ns()
            if command.kind == "dispatch":
                self._run(command.program, command.handles, command.params)
            elif command.kind == "copy":
                src = command.src.view(np.uint8)[command.src_offset: command.src_offset + command.nbytes]
                command.dst.view(np.uint8)[command.dst_offset: command.dst_offset + command.nbytes] = src
            elif command.kind == "fill":
                words = command.dst.view(np.uint8)[command.offset: command.offset + command.nbytes].view(np.uint32)
                words[:] = command.word
            elif command.kind == "write":
                command.dst.view(np.uint8)[command.offset: command.offset + command.nbytes] = command.data
            else:  # read: what the buffer holds at this point of the batch, delivered at _finish
                reads.append((command, command.src.view(np.uint8)[command.offset: command.offset + command.nbytes]
                              .copy()))
            spans.append((start, time.perf_counter_ns()))
        for vf, value in signals:
            vf.word[0] = value
        if vq is None:
            self._submitted += 1
            self._completed = serial = self._submitted
        else:
            vq.serial += 1
            serial = vq.serial
        rec["spans"][serial], rec["reads"][serial] = spans, reads
        return int(serial)

    def _finish(self, rec: dict[str, Any], serial: int) -> None:
        for command, data in rec["reads"].pop(serial, ()):
            command.out[:] = data

    def _timings(self, rec: dict[str, Any], serial: int) -> list[tuple[int, int]]:
        return rec["spans"].pop(serial)

    def _write(self, handle: np.ndarray, data: np.ndarray) -> None:
        handle.view(np.uint8)[: data.size] = data

    def _read(self, handle: np.ndarray, out: np.ndarray) -> None:
        out[:] = handle.view(np.uint8)[: out.size]

    def _build(self, code: str, entry: str, buffers: int, params: int,
               workgroup_size: tuple[int, int, int]) -> MemoryProgram:
        return self._compile(code, entry, buffers, params, workgroup_size, {})

    def _compile(self, code: str, entry: str, buffers: int, params: int | None,
                 workgroup_size: tuple[int, int, int], constants: dict[str | int, Any]) -> MemoryProgram:
        namespace: dict[str, Any] = {"np": np}
        try:
            exec(compile(code, "<kernel>", "exec", dont_inherit=True), namespace)
            fn = namespace[entry]
            block = _block_of(namespace["PARAMS"]) if "PARAMS" in namespace else None
        except (SyntaxError, KeyError, TypeError, ValueError) as exc:
            raise CompileError(NAME, "compile", log=f"{type(exc).__name__}: {exc}") from None
        declared_constants = dict(namespace.get("CONSTANTS", {}))
        for name, value in constants.items():  # checked like a vendor's reflection would
            if name not in declared_constants:
                raise InvalidArgument(NAME, "pipeline", detail=f"the code declares no constant {name!r} (it has "
                                      f"{', '.join(map(str, declared_constants)) or 'none'})")
            if type(value) is not type(declared_constants[name]) and not (
                    isinstance(value, int) and type(declared_constants[name]) is float):
                raise InvalidArgument(NAME, "pipeline", detail=f"constant {name!r} is a "
                                      f"{type(declared_constants[name]).__name__}, got {value!r}")
        namespace.update(declared_constants)
        namespace.update({str(name): value for name, value in constants.items()})
        names = fn.__code__.co_varnames[: fn.__code__.co_argcount]
        count = len(block.fields) if block is not None else len(names) - buffers if params is None else params
        if len(names) != buffers + count:
            raise InvalidArgument(NAME, "pipeline", detail=f"{entry} takes {len(names)} arguments, not "
                                  f"{buffers} buffers + {count} params")
        notes = getattr(fn, "__annotations__", {})
        declared = [StorageBinding(i, _DECLARED.get(str(notes.get(name))), True, name) for i, name in
                    enumerate(names[:buffers])]
        infos = [ConstantInfo(name, None, _CONSTANT_TYPES.get(type(value)), value)
                 for name, value in declared_constants.items()]
        program = MemoryProgram(fn, buffers, count, Interface.of(buffers, declared, block, infos))
        program.unpack = block.numpy_dtype() if block is not None else None
        return program

    def _pack(self, program: Program, params: Any) -> Any:
        if program.block is not None:
            return program.block.pack(params, NAME, "dispatch")
        pack_params(NAME, params, program.params)  # the kit's rules, though the double passes values
        return tuple(params)

    def _run(self, program: MemoryProgram, handles: list[np.ndarray], params: Any) -> None:
        if program.unpack is not None:
            fields = np.frombuffer(params, program.unpack)[0]
            program.fn(*handles, **{name: fields[name] for name in program.unpack.names or ()})
        else:
            program.fn(*handles, *params)

    def _launch(self, program: MemoryProgram, handles: list[np.ndarray], dims: tuple[int, int, int],
                params: Any) -> int:
        self._run(program, handles, params)
        self._submitted += 1
        self._completed = self._submitted
        return self._submitted

    def _wait(self, serial: int, seconds: float | None) -> bool:
        return True

    def _shutdown(self) -> None:
        pass


class _Shared:
    """A memfd and its mapping: exportable memory of the double."""

    def __init__(self, fd: int, size: int):
        self.fd, self.size = fd, size
        self.map = mmap.mmap(fd, size)

    def close(self) -> None:
        os.close(self.fd)  # the mapping stays until the arrays over it are gone


_CONSTANT_TYPES = {bool: DType.BOOL, int: DType.INT32, float: DType.FLOAT32}

SCALE_OFFSET = """
def main(x: "float32", y: "float32", a, b, n):
    y[:n] = x[:n] * a + b
"""
BROKEN = "def main(x, y, a, b, n):\n    y[:n] = = x\n"
TYPED_PARAMS = """
PARAMS = {"a": "float32", "pair": ("float32", 2), "n": "uint32", "k": "int32"}

def main(x: "float32", y: "float32", a, pair, n, k):
    y[:n] = a * x[:n] + pair[0] - pair[1] * np.float32(k)
"""
CONSTANTS = """
CONSTANTS = {"SCALE": 1.0, "BIAS": 0}
PARAMS = {"n": "uint32"}

def main(x: "float32", y: "float32", n):
    y[:n] = x[:n] * np.float32(SCALE) + np.float32(BIAS)
"""
