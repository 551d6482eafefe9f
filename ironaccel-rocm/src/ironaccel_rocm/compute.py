"""The cross-vendor ComputeDevice on HIP, by the compute kit (`ironaccel.compute.ComputeDeviceBase`).

Code is HIP C++ source with an ``extern "C" __global__`` kernel named `entry`, compiled by hipRTC for the
device's gcnArchName and loaded with hipModuleLoadData (a pipeline is a hipRTC program).  The kernel takes its
`buffers` device pointers first, then its `params` 32-bit scalars by value, checked against the code object's
metadata when the pipeline is made.  A dispatch is hipModuleLaunchKernel with the pipeline's workgroup size
(`program.workgroup_size`, set by the kit) as the block; its serial is an event recorded after it.

Execution model, each feature on the HIP mechanism that has it:

* queues: HIP streams (with priority);
* fences: timelines of hipEvents -- HIP has no timeline semaphore of its own, so a fence keeps (value, event)
  points; a signal records an event on the queue's stream, a device-side wait is hipStreamWaitEvent on the
  first point that reaches the value, and the value is the highest point whose event completed;
* batches: a recorded stream sequence, replayed onto the queue's stream at each submit (launches,
  hipMemcpy*Async, hipMemsetD32Async), so re-bound buffers and params need no re-recording and nothing
  beyond the calls a plain launch makes is needed.  A HIP graph (stream capture, hipGraphInstantiate,
  hipGraphLaunch) would cut the CPU cost per submit on hardware; it is untried here (no AMD GPU), and
  re-binding would then need hipGraphExecKernelNodeSetParams per changed node;
* timestamps: a hipEvent pair around each command of a batch, read with hipEventElapsedTime;
* element types and read-only bindings: the pointer arguments' types (``const float*`` is read-only);
* typed params: the kernel's C signature (`c_params`), each member checked against the code object;
* constants: ``__constant__`` scalars with an initializer (``__constant__ float SCALE = 1.0f;``), read from
  the source; a pipeline with constants loads its own module and writes them (hipModuleGetGlobal +
  hipMemcpyHtoD) before any launch;
* map and "host" memory: hipHostMalloc (mapped for its life, bindable); DLPack as kDLCPU by the kit's rule.
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Any

import numpy as np

from ironaccel.compute import (
    BufferHandle,
    ComputeDeviceBase,
    Interface,
    PipelineHandle,
    Program,
    Submission,
    pack_params,
)
from ironaccel.compute.params import ConstantInfo, c_params
from ironaccel.compute.shaders import StorageBinding
from ironaccel.errors import InvalidArgument
from ironaccel.types import CapabilityFlags, DeviceDescriptor, DType

from .binding import BACKEND
from .compiler import Program as HiprtcProgram
from .device import DeviceMemory, Event, Function, HipDevice, Module, PinnedMemory, Stream
from .launch import Packed

__all__ = ["HipComputeDevice"]

#: HIP's grid limits: x up to 2**31 - 1 blocks, y and z 65535.
GRID_LIMITS = (2**31 - 1, 65535, 65535)
_POLL = 50e-6


_C_CONSTANT_TYPES = {"float": DType.FLOAT32, "double": DType.FLOAT64, "int": DType.INT32,
                     "unsigned": DType.UINT32, "unsigned int": DType.UINT32, "bool": DType.BOOL,
                     "long long": DType.INT64, "unsigned long long": DType.UINT64}
_C_CONSTANT = re.compile(r"__constant__\s+(?:const\s+)?(unsigned long long|long long|unsigned int|unsigned|int|float|"
                         r"double|bool)\s+(\w+)\s*=\s*([^;]+);")


def hip_constants(code: str) -> list[ConstantInfo]:
    """The ``__constant__ <scalar> NAME = default;`` declarations of HIP C++ source, as specialization constants."""
    out = []
    for kind, name, default in _C_CONSTANT.findall(code):
        text = default.strip().rstrip("fFuUlL")
        try:
            value: Any = (text == "true") if kind == "bool" else float(text) if "." in text or "e" in text.lower() \
                else int(text, 0)
        except ValueError:
            value = None
        out.append(ConstantInfo(name, None, _C_CONSTANT_TYPES[kind], value))
    return out


_KERNEL = r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+{name}\s*\(([^)]*)\)"
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_POINTER = re.compile(r"(const\s+)?((?:unsigned\s+|signed\s+)?(?:long long|int|short|char)|unsigned|float|double|"
                      r"__half|half|bool)\s*(const\s*)?\*\s*(?:__restrict__\s*)?(\w*)")
_POINTEE = {"float": DType.FLOAT32, "double": DType.FLOAT64, "int": DType.INT32, "signed int": DType.INT32,
            "unsigned": DType.UINT32, "unsigned int": DType.UINT32, "short": DType.INT16,
            "unsigned short": DType.UINT16, "char": DType.INT8, "signed char": DType.INT8,
            "unsigned char": DType.UINT8, "long long": DType.INT64, "unsigned long long": DType.UINT64,
            "__half": DType.FLOAT16, "half": DType.FLOAT16, "bool": DType.BOOL}


def pointer_bindings(code: str, entry: str, buffers: int) -> list[StorageBinding]:
    """The element type and writability (``const T*`` is read-only) of the kernel's first `buffers` pointer
    arguments, where the source states them plainly; [] where it does not (templates, macros, typedefs)."""
    match = re.search(_KERNEL.format(name=re.escape(entry)), _COMMENTS.sub(" ", code))
    if not match:
        return []
    out = []
    for index, arg in enumerate(a.strip() for a in match.group(1).split(",")[:buffers]):
        found = _POINTER.fullmatch(" ".join(arg.split()))
        if found:
            kind = " ".join(found.group(2).split())
            out.append(StorageBinding(index, _POINTEE.get(kind), not found.group(1), found.group(4)))
    return out


def _constant_bytes(info: ConstantInfo, value: Any) -> bytes:
    """`value` as the bytes of constant `info`'s type; InvalidArgument for a value of another kind."""
    dtype = info.dtype
    assert dtype is not None
    kind = np.dtype(dtype.numpy).kind
    ok = (type(value) is bool) if kind == "b" else (type(value) in (int, float) if kind == "f"
                                                    else type(value) is int)
    if not ok:
        raise InvalidArgument(BACKEND, "pipeline", detail=f"constant {info.name!r} is {dtype.value}, got {value!r}")
    try:
        return np.array(value, dtype.numpy).tobytes()
    except OverflowError:
        raise InvalidArgument(BACKEND, "pipeline", detail=f"constant {info.name!r} = {value!r} does not fit "
                              f"{dtype.value}") from None


class HipBuffer(BufferHandle):
    __slots__ = ()


class HipPipeline(PipelineHandle):
    __slots__ = ()


class HipSubmission(Submission):
    __slots__ = ()


class HipProgram(Program):
    """A loaded module and its kernel (one hipRTC compile), shared by the pipelines with its key."""

    def __init__(self, module: Module, function: Function, buffers: int, params: int):
        super().__init__(buffers, params)
        self.module, self.function = module, function
        #: Where the first by-value argument starts in the kernel's arguments (a typed block's offset 0).
        self.base = 0

    def release(self) -> None:
        if not self.released:
            super().release()
            self.module.close()


class HipComputeDevice(ComputeDeviceBase):
    """ComputeDevice over a HipDevice (which it owns and closes)."""

    backend = BACKEND
    language = "HIP C++"
    buffer_type = HipBuffer
    pipeline_type = HipPipeline
    submission_type = HipSubmission
    buffer_limit_name = "the device's memory"
    group_limit_name = "HIP's grid limits"
    execution_features = frozenset({"queues", "fences", "batches", "timestamps", "typed_params", "map",
                                    "dlpack", "constants"})
    #: "host" memory is hipHostMalloc'd: mapped for its life and bindable (kernels reach it by unified addressing);
    #: DLPack exports it as kDLCPU (the kit's rule); device memory has no DLPack export here (no kDLROCM yet).
    supported_memory = ("device", "host")
    bindable_memory = ("device", "host")
    #: Streams one device may have besides the null stream (a bound on what a caller can leak).
    MAX_QUEUES = 64

    def __init__(self, hip: HipDevice):
        if not isinstance(hip, HipDevice):
            raise InvalidArgument(BACKEND, "open", detail=f"expected a HipDevice, got {type(hip).__name__}")
        self.hip = hip
        descriptor: DeviceDescriptor = hip.descriptor
        if "timestamps" not in self.execution_features:  # HIP has event timing; this device cannot read it yet
            descriptor = dataclasses.replace(descriptor,
                                             capabilities=descriptor.capabilities & ~CapabilityFlags.TIMESTAMPS)
        self.arch = str(descriptor.extras.get("gcn_arch_name") or "") or None
        #: Events recorded after each submission of the null stream, by serial, until waited for.
        self._events: dict[int, Event] = {}
        self._submitted = self._completed = 0
        self._open(descriptor, max_buffer_bytes=max(descriptor.memory_bytes, 1), group_limits=GRID_LIMITS)

    # -- memory ------------------------------------------------------------------------------------------

    def _create_buffer(self, nbytes: int, dtype: DType, data: np.ndarray | None) -> DeviceMemory:
        memory = self.hip.alloc(nbytes)
        if data is not None:
            try:
                memory.copy_from(data)
            except BaseException:
                memory.close()
                raise
        return memory

    def _free_buffer(self, handle: DeviceMemory | PinnedMemory) -> None:
        handle.close()  # hipFree / hipHostFree wait for the work that uses it

    def _write(self, handle: DeviceMemory | PinnedMemory, data: np.ndarray) -> None:
        if isinstance(handle, PinnedMemory):
            self.hip.synchronize()  # host memory: after the work queued before
            handle.array[: data.size] = data
        else:
            handle.copy_from(data)  # hipMemcpyHtoD on the null stream: after earlier work

    def _read(self, handle: DeviceMemory | PinnedMemory, out: np.ndarray) -> None:
        if isinstance(handle, PinnedMemory):
            self.hip.synchronize()
            out[:] = handle.array[: out.size]
        else:
            handle.copy_to(out)

    def _create_memory(self, nbytes: int, dtype: DType, memory: str, exportable: bool) -> Any:
        if exportable:
            raise self._unsupported("alloc", "export_memory")
        return self.hip.pinned(nbytes) if memory == "host" else self.hip.alloc(nbytes)

    def _memory_of(self, handle: Any) -> tuple[bool, bool]:
        pinned = isinstance(handle, PinnedMemory)
        return pinned, pinned

    def _map(self, handle: PinnedMemory, write: bool) -> int:
        self.hip.synchronize()  # the host sees what queued work wrote
        return handle.ptr

    def _unsupported_reason(self, feature: str) -> str:
        why = {
            "export_memory": "HIP shares memory by hipIpcGetMemHandle, not by fd; not written yet",
            "import_memory": "importing fds needs hipImportExternalMemory; not written yet",
            "export_fence": "fences here are hipEvent timelines, which no fd carries",
            "import_fence": "importing fds needs hipImportExternalSemaphore; not written yet",
        }
        return why.get(feature, super()._unsupported_reason(feature))

    # -- programs ----------------------------------------------------------------------------------------

    def _build(self, code: str, entry: str, buffers: int, params: int,
               workgroup_size: tuple[int, int, int]) -> HipProgram:
        return self._compile(code, entry, buffers, params, workgroup_size, {})

    def _compile(self, code: str, entry: str, buffers: int, params: int | None,
                 workgroup_size: tuple[int, int, int], constants: dict[str | int, Any]) -> HipProgram:
        """hipRTC for the device's target, then hipModuleLoadData; the kernel's arguments (from the code object)
        must be `buffers` pointers then `params` 32-bit values, or (params None) the block `c_params` reads
        from the source, each member where the code object puts it."""
        declared = {c.name: c for c in hip_constants(code)}
        values = {}
        for name, value in constants.items():
            info = declared.get(str(name))
            if info is None:
                raise InvalidArgument(BACKEND, "pipeline", detail=(
                    f"the code declares no __constant__ {name!r} with an initializer (it has "
                    f"{', '.join(declared) or 'none'})"))
            values[info.name] = _constant_bytes(info, value)
        block = c_params(code, entry, buffers) if params is None else None
        if params is None and block is None:
            raise InvalidArgument(BACKEND, "pipeline", detail=(
                f"params by name need kernel {entry!r}'s signature: {buffers} pointer argument(s) then by-value "
                "arguments of plain C types (no templates or macros); pass params=N for positional params"))
        image = HiprtcProgram(code).compile(arch=self.arch)
        module = self.hip.load_module(bytes(image))
        try:
            for name, raw in values.items():
                ptr, size = module.global_(name)
                if size != len(raw):
                    raise InvalidArgument(BACKEND, "pipeline", detail=f"constant {name!r} is {size} bytes in the "
                                          f"code object, {len(raw)} as read from the source")
                from .binding import call

                call(self.hip._hip.hipMemcpyHtoD, "hipMemcpyHtoD", ptr, raw, size)
            function = module.function(entry)
            layout = function.layout or ()
            count = len(block.fields) if block is not None else int(params or 0)
            pointers = [a.pointer for a in layout]
            if pointers != [True] * buffers + [False] * count or (
                    block is None and any(a.size != 4 for a in layout[buffers:])):
                what = f"{count} params from its signature" if block is not None else f"{count} 32-bit param(s)"
                raise InvalidArgument(BACKEND, "pipeline", detail=(
                    f"kernel {entry!r} takes {len(layout)} parameter(s) ({', '.join(self._kinds(layout))}), but the "
                    f"pipeline declares {buffers} buffer pointer(s) then {what}"))
            if block is not None:
                base = layout[buffers].offset if count else 0
                for arg, fld in zip(layout[buffers:], block.fields):
                    if arg.offset - base != fld.offset or arg.size != fld.type.size:
                        raise InvalidArgument(BACKEND, "pipeline", detail=(
                            f"kernel {entry!r}: param {fld.name!r} is at {arg.offset - base} ({arg.size} bytes) in the "
                            f"code object but at {fld.offset} ({fld.type.size} bytes) as read from the source"))
        except BaseException:
            module.close()
            raise
        program = HipProgram(module, function, buffers, count)
        program.interface = Interface.of(buffers, pointer_bindings(code, entry, buffers), block,
                                         list(declared.values()))
        program.base = layout[buffers].offset if block is not None and count else 0
        return program

    @staticmethod
    def _kinds(layout: Any) -> list[str]:
        return ["pointer" if a.pointer else f"{a.size}-byte value" for a in layout]

    # -- launch and wait ----------------------------------------------------------------------------------

    def _pack(self, program: Program, params: Any) -> Any:
        """A typed block's bytes (`ParamBlock.pack`); positional params are checked by the kit's 32-bit rule and
        kept as given (a batch re-checks them on update)."""
        if program.block is not None:
            return program.block.pack(params, BACKEND, "dispatch")
        pack_params(BACKEND, params, program.params, "dispatch")
        return tuple(params)

    def _packed(self, program: HipProgram, handles: list[DeviceMemory], params: Any) -> Packed:
        layout = program.function.layout or ()
        raw = [int(h.ptr).to_bytes(8, "little") for h in handles]
        if program.block is not None:
            block = bytes(params)
            raw += [block[a.offset - program.base: a.offset - program.base + a.size] for a in layout[len(handles):]]
        else:
            words = pack_params(BACKEND, params, program.params, "dispatch")
            raw += [words[4 * i: 4 * i + 4] for i in range(program.params)]
        return Packed(layout, raw)

    def _go(self, stream: Stream | None, program: HipProgram, handles: list[DeviceMemory],
            dims: tuple[int, int, int], params: Any) -> None:
        packed = self._packed(program, handles, params)
        fn = program.function
        from .binding import call

        call(self.hip._hip.hipModuleLaunchKernel, "hipModuleLaunchKernel", fn._handle, *dims,
             *program.workgroup_size, 0, self.hip._stream(stream, "hipModuleLaunchKernel"), packed.address, None)

    def _launch(self, program: HipProgram, handles: list[DeviceMemory], dims: tuple[int, int, int],
                params: Any) -> int:
        self._go(None, program, handles, dims, params)
        self._submitted += 1
        self._events[self._submitted] = self.hip.event().record(None)
        return self._submitted

    def _wait(self, serial: int, seconds: float | None) -> bool:
        pending = sorted(s for s in self._events if s <= serial)
        deadline = None if seconds is None else time.monotonic() + seconds
        for s in pending:
            event = self._events[s]
            if deadline is None:
                event.synchronize()
            else:
                while not event.query():
                    if time.monotonic() >= deadline:
                        return False
                    time.sleep(_POLL)
            self._events.pop(s).close()
            self._completed = max(self._completed, s)
        self._completed = max(self._completed, serial)
        return True

    # -- queues (HIP streams) -----------------------------------------------------------------------------

    def _queue_limit(self) -> int:
        return self.MAX_QUEUES

    def _create_queue(self, priority: int) -> tuple[dict[str, Any], int]:
        stream = self.hip.stream(-priority)  # the kit: higher is more urgent; HIP: lower is
        return {"stream": stream, "serial": 0, "events": {}}, -stream.priority

    def _destroy_queue(self, vq: dict[str, Any]) -> None:
        for event in vq["events"].values():
            event.close()
        vq["stream"].close()

    def _launch_on(self, vq: Any, program: Any, handles: list[Any], dims: tuple[int, int, int], params: Any) -> int:
        if vq is None:
            return self._launch(program, handles, dims, params)
        self._go(vq["stream"], program, handles, dims, params)
        vq["serial"] += 1
        vq["events"][vq["serial"]] = self.hip.event().record(vq["stream"])
        return int(vq["serial"])

    def _wait_on(self, vq: Any, serial: int, seconds: float | None) -> bool:
        if vq is None:
            return self._wait(serial, seconds)
        deadline = None if seconds is None else time.monotonic() + seconds
        for s in sorted(s for s in vq["events"] if s <= serial):
            event = vq["events"][s]
            while not event.query():
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                time.sleep(_POLL)
            vq["events"].pop(s).close()
        return True

    def _last_serial(self, vq: Any) -> int:
        return self._submitted if vq is None else int(vq["serial"])

    # -- fences (timelines of hipEvents) -------------------------------------------------------------------

    def _create_fence(self, value: int, exportable: bool) -> dict[str, Any]:
        if exportable:
            raise self._unsupported("create_fence", "export_fence")
        return {"value": value, "points": []}

    def _destroy_fence(self, vf: dict[str, Any]) -> None:
        for _, event in vf["points"]:
            event.close()
        vf["points"].clear()

    def _fence_value(self, vf: dict[str, Any]) -> int:
        points = vf["points"]
        while points and points[0][1].query():  # points are in signal order, and each queue runs in order
            value, event = points.pop(0)
            vf["value"] = max(vf["value"], value)
            event.close()
        return int(vf["value"])

    def _fence_wait(self, vf: dict[str, Any], value: int, seconds: float | None) -> bool:
        deadline = None if seconds is None else time.monotonic() + seconds
        while self._fence_value(vf) < value:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(_POLL)
        return True

    def _signal(self, vq: Any, vf: dict[str, Any], value: int) -> None:
        vf["points"].append((value, self.hip.event().record(None if vq is None else vq["stream"])))

    def _wait_fence(self, vq: Any, vf: dict[str, Any], value: int) -> None:
        if self._fence_value(vf) >= value:
            return
        event = next(e for v, e in vf["points"] if v >= value)  # the kit refuses a value nothing will signal
        stream = None if vq is None else vq["stream"]
        if stream is None:
            from .binding import call

            call(self.hip._hip.hipStreamWaitEvent, "hipStreamWaitEvent", self.hip._stream(None, "wait"),
                 event._handle, 0)
        else:
            stream.wait(event)

    # -- batches (a recorded stream sequence) and timestamps -----------------------------------------------

    def _record(self, commands: Any, timestamps: bool) -> dict[str, Any]:
        return {"commands": commands, "timestamps": timestamps, "subs": {}}

    def _update(self, rec: dict[str, Any], index: int, command: Any) -> bool:
        return True  # a replay reads each command's fields as they are at submit

    def _replay(self, stream: Stream | None, command: Any, keep: list[Any], reads: list[Any]) -> None:
        from .binding import call

        hip = self.hip._hip
        kind = command.kind
        if kind == "dispatch":
            self._go(stream, command.program, command.handles, command.dims, command.params)
            return
        s = self.hip._stream(stream, f"submit ({kind})")
        if kind == "copy":
            call(hip.hipMemcpyDtoDAsync, "hipMemcpyDtoDAsync", command.dst.ptr + command.dst_offset,
                 command.src.ptr + command.src_offset, command.nbytes, s)
        elif kind == "fill":
            call(hip.hipMemsetD32Async, "hipMemsetD32Async", command.dst.ptr + command.offset,
                 int(np.uint32(command.word).view(np.int32)), command.nbytes // 4, s)
        elif kind == "write":
            data = np.ascontiguousarray(command.data).view(np.uint8)
            keep.append(data)
            call(hip.hipMemcpyHtoDAsync, "hipMemcpyHtoDAsync", command.dst.ptr + command.offset, data.ctypes.data,
                 command.nbytes, s)
        else:  # read: into a staging array, delivered to `out` at _finish
            staging = np.empty(command.nbytes, np.uint8)
            call(hip.hipMemcpyDtoHAsync, "hipMemcpyDtoHAsync", staging.ctypes.data, command.src.ptr + command.offset,
                 command.nbytes, s)
            reads.append((command, staging))

    def _submit(self, vq: Any, rec: dict[str, Any], waits: list[tuple[Any, int]],
                signals: list[tuple[Any, int]]) -> int:
        stream = None if vq is None else vq["stream"]
        for vf, value in waits:
            self._wait_fence(vq, vf, value)
        keep: list[Any] = []
        reads: list[Any] = []
        marks: list[tuple[Event, Event]] = []
        try:
            for command in rec["commands"]:
                start = self.hip.event().record(stream) if rec["timestamps"] else None
                self._replay(stream, command, keep, reads)
                if start is not None:
                    marks.append((start, self.hip.event().record(stream)))
        except BaseException:
            for a, b in marks:
                a.close()
                b.close()
            raise
        for vf, value in signals:
            self._signal(vq, vf, value)
        done = self.hip.event().record(stream)
        if vq is None:
            self._submitted += 1
            serial = self._submitted
            self._events[serial] = done
        else:
            vq["serial"] += 1
            serial = int(vq["serial"])
            vq["events"][serial] = done
        rec["subs"][serial] = (marks, reads, keep)
        return serial

    def _finish(self, rec: dict[str, Any], serial: int) -> None:
        sub = rec["subs"].get(serial)
        if sub is None:
            return
        for command, staging in sub[1]:
            command.out.reshape(-1).view(np.uint8)[: staging.size] = staging
        if not sub[0]:
            rec["subs"].pop(serial)

    def _timings(self, rec: dict[str, Any], serial: int) -> list[tuple[float, float]]:
        marks = rec["subs"].pop(serial, ((), (), ()))[0]
        if not marks:
            return []
        base = marks[0][0]
        base.synchronize()
        marks[-1][1].synchronize()
        spans = [(base.elapsed_ms(a) * 1e6, base.elapsed_ms(b) * 1e6) for a, b in marks]
        for a, b in marks:
            a.close()
            b.close()
        return spans

    def _free_recording(self, rec: dict[str, Any]) -> None:
        for marks, _, _ in rec["subs"].values():
            for a, b in marks:
                a.close()
                b.close()
        rec["subs"].clear()

    def _shutdown(self) -> None:
        for event in self._events.values():
            event.close()
        self._events.clear()
        self.hip.synchronize()
        self.hip.close()
