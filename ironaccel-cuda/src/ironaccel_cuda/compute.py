"""The cross-vendor ComputeDevice surface on a CUDA Device, by the compute kit's rules.

Code is CUDA C++ source (compiled by NVRTC to CUBIN for the device), PTX
text, or a module image (CUBIN or fatbin bytes).  A kernel takes its
`buffers` device pointers first, then its `params` scalars by value, in
order; the block size is `workgroup_size`.  Everything runs on the device's
default stream, so calls are ordered as on one queue.  Buffers are the CUDA
backend's own `DeviceBuf`s; pipelines and submissions are the kit's handles
(`ironaccel.compute`).  Buffers, pipelines and submissions belong to the
Device handle that made them: another handle's objects are rejected
(InvalidArgument), as the protocol asks.

`Device` is also the whole CUDA API, so it cannot subclass the kit's
`ComputeDeviceBase`; it uses the kit's pieces instead -- the argument checks,
params rule, `download(out=)` rule, program cache, pipeline handles and
`wait_for` -- so every rule of `ironaccel.protocols.ComputeDevice` is the
same one.  What CUDA cannot check: element types (a module does not carry
its pointer types) and read-only bindings (so a buffer is never bound twice).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ironaccel import DType
from ironaccel.compute import (
    Interface,
    PipelineHandle,
    Program,
    ProgramCache,
    buffer_list,
    check_bindings,
    check_out,
    count,
    entry_name,
    flat_bytes,
    host_array,
    pack_params,
    source_text,
    wait_for,
    workgroups,
)
from ironaccel.compute import workgroup_size as workgroup_size_of
from ironaccel.compute.execution import constants_key
from ironaccel.compute.params import ConstantInfo, ParamBlock, c_params
from ironaccel.compute.sources import settle, translate

from . import _core, _driver
from . import constants as specialization
from .errors import BACKEND, closed, invalid
from .execution import CudaExecution, _Packed, _Raw, run
from .memory import DeviceBuf
from .program import Program as NvrtcProgram

if TYPE_CHECKING:
    from .event import Event
    from .module import Function, Module

__all__ = ["ComputeDeviceMixin", "Pipeline", "Submission"]

#: Compiled modules kept per Device handle beyond those an open pipeline uses.
MAX_PROGRAMS = 128
_IMAGE_MAGIC = (b"\x7fELF", b"\x50\xed\x55\xba")  # CUBIN (ELF), fatbin
_POLL_SLEEP = 50e-6


def looks_like_ptx(code: str) -> bool:
    return ".entry" in code and (".version" in code or ".target" in code) and "__global__" not in code


def _code_key(code: Any) -> tuple[str, Any]:
    """("image", bytes), ("ptx", text) or ("c++", text): what `code` is, checked by the kit's text rules."""
    if isinstance(code, (bytes, bytearray, memoryview)):
        raw = bytes(code)
        if raw[:4] in _IMAGE_MAGIC:
            return "image", raw
        text = source_text(BACKEND, raw[:-1] if raw.endswith(b"\0") else raw, "CUDA C++ or PTX")
    elif isinstance(code, str):
        text = source_text(BACKEND, code, "CUDA C++ or PTX")
    else:
        raise invalid("pipeline", f"code must be CUDA C++ or PTX text (str) or a module image (bytes), "
                      f"got {type(code).__name__}")
    return ("ptx" if looks_like_ptx(text) else "c++"), text


class CudaProgram(Program):
    """A loaded module and its kernel, shared by every Pipeline with the same code, entry and interface."""

    def __init__(self, module: Module, function: Function, buffers: int, params: int,
                 block: ParamBlock | None = None, constants: Sequence[ConstantInfo] = ()):
        interface = Interface.unknown(buffers) if block is None and not constants else \
            Interface.of(buffers, (), block, constants)
        super().__init__(buffers, params, interface)
        self.module = module
        self.function = function
        self.block = block
        #: the typed block's launch, its argument area set up at the first dispatch (execution.run)
        self.block_launch: Any = None

    def release(self) -> None:
        super().release()
        self.module.close()


class Pipeline(PipelineHandle):
    """A kernel ready to dispatch: `entry`, `buffers` pointers, `params` scalars, a fixed `block`."""

    __slots__ = ()

    @property
    def block(self) -> tuple[int, int, int]:
        """The threads per block (x, y, z) every dispatch of it launches: its workgroup size."""
        return self.workgroup_size

    @property
    def function(self) -> Function:
        """The kernel behind the pipeline, for what the kit does not do (attributes, a raw launch)."""
        program = self.program
        if program is None:
            raise closed("Pipeline.function", "pipeline")
        return program.function  # type: ignore[attr-defined, no-any-return]


class Submission:
    """Work handed to the device: `wait(timeout)` blocks until it is done (the kit's one timeout rule)."""

    __slots__ = ("_event", "_device")

    def __init__(self, event: Event, device: Any = None):
        self._event = event
        self._device = device

    @property
    def queue(self) -> Any:
        """The queue this work went to: the device's default queue (the default stream)."""
        return self._device.queue

    def wait(self, timeout: float | None = None) -> None:
        """Block until the submitted work finishes; errors.Timeout after `timeout` seconds (None: no limit)."""
        wait_for(BACKEND, "cuEventSynchronize", self._block, timeout)

    def _block(self, seconds: float | None) -> bool:
        if seconds is None:
            self._event.synchronize()
            return True
        deadline = time.monotonic() + seconds
        while not self._event.query():
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_SLEEP)
        return True

    def done(self) -> bool:
        """Whether the submitted work has finished, without waiting."""
        return self._event.query()


class _Programs:
    """The handle's program cache; `Device.close()` closes it with the handle's pools."""

    def __init__(self) -> None:
        self.cache = ProgramCache(MAX_PROGRAMS)

    def close(self) -> None:
        self.cache.clear()


class ComputeDeviceMixin(CudaExecution):
    """upload / write / download / pipeline / dispatch for `Device` (synchronize and close live there), and the
    execution model (queues, fences, batches, timestamps: `execution.CudaExecution`).

    Buffers are `DeviceBuf`s (a class the hot path builds at import, so annotated `Any` here).
    """

    ordinal: int
    _state: Any
    _pools: list[Any]

    def _compute_check(self, op: str) -> None:
        self._check_open(op)  # type: ignore[attr-defined]
        if _driver.forked:
            raise _driver.fork_error(op)

    def upload(self, array: Any) -> Any:
        """A new buffer holding a copy of a C-contiguous array, flattened in C order."""
        op = "upload"
        self._compute_check(op)
        array = host_array(BACKEND, array, op)
        if array.size == 0:
            raise invalid(op, "the array is empty; a buffer holds at least one element")
        try:
            dtype = DType.of(array.dtype)
        except TypeError as exc:
            raise invalid(op, str(exc)) from None
        buf = self.alloc(array.size, dtype)  # type: ignore[attr-defined]
        try:
            buf.copy_from(array.reshape(-1))
        except BaseException:
            buf.close()
            raise
        return buf  # type: ignore[no-any-return]

    def write(self, buffer: Any, array: Any) -> None:
        """Copy a C-contiguous array's bytes into the start of `buffer`, in order on the default stream.

        Work queued before the write still reads the old contents; `array` may be reused at once.
        """

        op = "write"
        self._compute_check(op)
        self._own(buffer, op)
        array = host_array(BACKEND, array, op)
        nbytes = array.nbytes
        if nbytes > buffer.nbytes:
            raise invalid(op, f"{nbytes} bytes into a buffer of {buffer.nbytes}")
        if nbytes == 0:
            return
        self._bind_here()  # type: ignore[attr-defined]
        default = self._state.default_stream
        _core.memcpy_htod(buffer._dp, flat_bytes(array), nbytes, default._h)
        _core.stream_sync(default._h)

    def download(self, buffer: Any, out: np.ndarray | None = None) -> np.ndarray:
        """The buffer's contents as a new 1-D array, or its first out.nbytes raw bytes into `out`."""

        op = "download"
        self._compute_check(op)
        self._own(buffer, op)
        default = self._state.default_stream
        self._bind_here()  # type: ignore[attr-defined]
        if out is None:
            result = buffer.copy_to_host(None, stream=default)
        else:
            check_out(BACKEND, out, buffer.nbytes, op)
            if out.nbytes == 0:
                return out
            if out.dtype == buffer._npdt and out.nbytes == buffer.nbytes:  # the pinned staging pipeline
                buffer.copy_to_host(out.reshape(-1), stream=default)
            else:  # raw leading bytes, any dtype or size
                _core.memcpy_dtoh(flat_bytes(out), buffer._dp, out.nbytes, default._h)
            result = out
        _core.stream_sync(default._h)
        return result  # type: ignore[no-any-return]

    def pipeline(self, code: str | bytes | Sequence[int], entry: str = "main", *, buffers: int,
                 params: Any = "auto", workgroup_size: Any = (64, 1, 1), constants: Any = None) -> Pipeline:
        """A pipeline from CUDA C++ (NVRTC to CUBIN), PTX or a module image; loaded once per (code, entry,
        buffers, params) on this handle, with the kernel's parameter count checked.

        With `params="auto"` (the default), the by-value arguments of a CUDA C++ kernel are read from its
        signature (`c_params`): a dispatch then takes them by name (dict, numpy record, dataclass) or in order,
        packed as the kernel's parameter buffer lays them out; code whose signature is not readable takes none.
        A source object (`ironaccel_slang.Slang`) is translated to CUDA C++ first (`ironaccel.compute.sources`)."""
        op = "pipeline"
        self._compute_check(op)
        fixed = constants_key(BACKEND, constants, op)
        buffers = count(BACKEND, "buffers", buffers, op)
        params = None if type(params) is str and params == "auto" else count(BACKEND, "params", params, op)
        entry = entry_name(BACKEND, entry, op)
        block = workgroup_size_of(BACKEND, workgroup_size, op)
        named = entry
        foreign = translate(BACKEND, self, code, entry, dict(fixed), buffers)  # Slang: constants applied there
        if foreign is not None:
            code, entry, fixed = foreign.code, foreign.entry, ()
            params = foreign.params if params is None else params
            block = foreign.workgroup_size or block
        kind, code_key = _code_key(code)
        programs = self._program_cache()
        key = (kind, code_key, entry, buffers, params, fixed, None if foreign is None else foreign.key)
        program = programs.get(key)
        if program is None:
            program = self._load(kind, code_key, entry, buffers, params, dict(fixed))
            if foreign is not None:
                try:
                    settle(program, foreign)
                except BaseException:
                    program.release()
                    raise
            programs.add(key, program)
        return Pipeline(self, program, named, block)

    def _program_cache(self) -> ProgramCache:
        holder = self.__dict__.get("_compute_programs")
        if holder is None:
            holder = self.__dict__["_compute_programs"] = _Programs()
            self._pools.append(holder)  # Device.close() closes its pools, and with them these modules
        return holder.cache

    def _load(self, kind: str, code: Any, entry: str, buffers: int, params: int | None,
              constants: dict[Any, Any]) -> CudaProgram:
        op = "pipeline"
        defines, declared = specialization.defines(kind, code, constants)
        # The signature is read whether or not the count is given, so params by name work either way (as on the
        # other backends); a given count that disagrees with it is the layout check's error below.
        block = c_params(specialization.without_defaults(code), entry, buffers) if kind == "c++" else None
        if params is None:
            params = len(block.fields) if block is not None else 0
        elif block is not None and len(block.fields) != params:
            block = None
        if kind == "image":
            module = self.load_module(code)  # type: ignore[attr-defined]
        elif kind == "ptx":
            module = self.load_module(code.encode())  # type: ignore[attr-defined]
        else:
            options = None
            if defines:
                from .options import CompileOptions

                options = CompileOptions(defines=defines)
            obj = NvrtcProgram(code, options, name_expressions=[entry]).compile(
                "cubin", arch=self.compute_capability)  # type: ignore[attr-defined]
            module = self.load_module(obj)  # type: ignore[attr-defined]
        try:
            function = module.function(entry)
            layout = function.param_layout()
            if layout is not None and len(layout) != buffers + params:
                raise invalid(op, f"kernel {entry!r} takes {len(layout)} parameters, but the pipeline declares "
                              f"{buffers} buffers + {params} params")
        except BaseException:
            module.close()
            raise
        return CudaProgram(module, function, buffers, params, block, declared)

    def dispatch(self, pipeline: Pipeline, buffers: Sequence[Any], groups: int | tuple[int, ...],
                 params: Sequence[Any] = ()) -> Submission:
        """Queue `pipeline` over `groups` blocks; returns at once."""
        program, buffers, grid, values = self._checked(pipeline, buffers, groups, params, "dispatch")
        self._bind_here()  # type: ignore[attr-defined]
        run(program, grid, buffers, values, self._state.default_stream)
        return Submission(self._state.default_stream.record(self.create_event()), self)  # type: ignore[attr-defined]

    def _checked(self, pipeline: Any, buffers: Any, groups: Any, params: Any,
                 op: str = "dispatch") -> tuple[Any, list[Any], tuple[int, int, int], Any]:
        """(program, buffers, grid, (block, param values)): a dispatch's arguments, checked by the kit's rules."""
        self._compute_check(op)
        if type(pipeline) is not Pipeline or pipeline.device is not self:
            what = "a pipeline of another device" if isinstance(pipeline, Pipeline) else type(pipeline).__name__
            raise invalid(op, f"expected a pipeline of this device, got {what}")
        program = pipeline.program
        if program is None:
            raise closed(op, "pipeline")
        grid = workgroups(BACKEND, groups, self._state.attributes.max_grid_dim, op, "the device's grid limits")
        buffers = buffer_list(BACKEND, buffers, program.buffers, op)
        for buf in buffers:
            self._own(buf, op)
        check_bindings(BACKEND, program.interface, buffers, op)
        block = program.block
        if block is not None:
            return program, list(buffers), grid, _Raw(pipeline.workgroup_size, block.pack(params, BACKEND, op))
        pack_params(BACKEND, params, program.params, op)  # the kit's rule for what a param may be
        return program, list(buffers), grid, _Packed(pipeline.workgroup_size, [_scalar(p) for p in params])

    # -- cold helpers -------------------------------------------------------

    def _alloc_memory(self, size: Any, dtype: Any, stream: Any, memory: Any, exportable: Any) -> Any:
        """`alloc(memory=, exportable=)`: the kit's checks; device memory that is not exportable is plain alloc."""
        op = "alloc"
        self._compute_check(op)
        if type(memory) is str and memory == "device" and exportable is False:
            return self.alloc(size, dtype, stream)  # type: ignore[attr-defined]
        from ironaccel.compute.checks import element_count, element_type

        dt = element_type(BACKEND, dtype, op)
        size = element_count(BACKEND, size, dt, self._state.total_memory, op, "the device's memory")
        with self._lock:
            return self._alloc_kind(size, dt, memory, exportable)

    def _own(self, buffer: Any, op: str) -> Any:
        ours = isinstance(buffer, DeviceBuf)
        if not ours or buffer.device is not self:
            what = "a buffer of another device" if ours else type(buffer).__name__
            raise invalid(op, f"expected a buffer of this device, got {what}")
        if buffer.ptr is None:
            raise closed(op, "buffer")
        return buffer


def _scalar(value: Any) -> Any:
    """A param as the kernel receives it: Python floats as float32, ints as int32 (uint32 above its range)."""
    kind = type(value)
    if kind is float:
        return np.float32(value)
    if kind is int:
        return np.int32(value) if value < 2**31 else np.uint32(value)
    return value
