"""OpenGLDevice: ironaccel's ComputeDevice on a headless EGL OpenGL 4.3 context (moderngl).

GL executes commands in issue order, so every call is ordered after the ones
before it.  After each dispatch a memory barrier (shader storage + buffer
update) makes the shader's writes visible to later dispatches and to reads.
A GL context is current on one thread at a time: a device is used from the
thread that opened it, and it makes its context current on every call, so
several devices (or other moderngl code) can share that thread.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from ironaccel.compute import (
    check_out,
    element_type,
    evict_unused,
    host_array,
    numpy_dtype,
    pack_params,
    source_text,
    workgroups,
)
from ironaccel.errors import ClosedError, InvalidArgument, InvalidState, OutOfMemory
from ironaccel.types import DeviceDescriptor, DType

from .context import GLCalls, create_context
from .memory import OpenGLBuffer
from .pipeline import OpenGLPipeline, Program
from .sync import Completion, Submission

BACKEND = "opengl"
#: Linked programs kept per device (only those no open Pipeline uses are dropped).
MAX_PROGRAMS = 128


class OpenGLDevice:
    """A ComputeDevice on an OpenGL 4.3 context; code is GLSL 430 compute shaders."""

    def __init__(self, moderngl: Any, descriptor: DeviceDescriptor):
        self.descriptor = descriptor
        self.ctx = create_context(moderngl)
        self._thread = threading.get_ident()
        self._make_current = self.ctx.mglo.__enter__
        self._calls = GLCalls(self.ctx)
        info = self.ctx.info
        self.max_groups = tuple(int(v) for v in info["GL_MAX_COMPUTE_WORK_GROUP_COUNT"])
        self._group_limits = self.max_groups
        self.max_buffer_bytes = int(info["GL_MAX_SHADER_STORAGE_BLOCK_SIZE"])
        self.max_storage_blocks = int(info["GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS"])
        self._barrier = moderngl.SHADER_STORAGE_BARRIER_BIT | moderngl.BUFFER_UPDATE_BARRIER_BIT
        self._completion = Completion(self, self._calls)
        self._programs: OrderedDict[tuple[Any, ...], Program] = OrderedDict()
        self._bound: list[Any] = [None] * self.max_storage_blocks  # moderngl Buffer bound at each SSBO binding
        self._bound_uniform: Any = None
        self._closed = False

    # -- context ----------------------------------------------------------------------------------------

    def _enter(self, op: str) -> None:
        """Check the device is usable here and make its context current."""
        if self._closed:
            raise ClosedError(BACKEND, op, "device")
        if threading.get_ident() != self._thread:
            raise InvalidState(BACKEND, op, detail="an OpenGL device is used from the thread that opened it "
                               "(its EGL context is current there)")
        self._make_current()

    # -- memory -----------------------------------------------------------------------------------------

    def _new_buffer(self, size: Any, dtype: DType, op: str, data: Any = None) -> OpenGLBuffer:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
            raise InvalidArgument(BACKEND, op, detail=f"size must be an int, got {size!r}")
        size = int(size)
        nbytes = size * dtype.itemsize
        if size <= 0 or nbytes > self.max_buffer_bytes:
            raise InvalidArgument(BACKEND, op, detail=f"size {size} x {dtype.itemsize} bytes is outside "
                                  f"1..{self.max_buffer_bytes} bytes (GL_MAX_SHADER_STORAGE_BLOCK_SIZE)")
        handle = self.ctx.buffer(data) if data is not None else self.ctx.buffer(reserve=nbytes)
        error = self.ctx.error
        if error != "GL_NO_ERROR":
            handle.release()
            if error == "GL_OUT_OF_MEMORY":
                raise OutOfMemory(BACKEND, "glBufferData", code_name=error, detail=f"{nbytes} bytes")
            raise InvalidArgument(BACKEND, "glBufferData", code_name=error, detail=f"{nbytes} bytes")
        return OpenGLBuffer(self, handle, dtype, size)

    def alloc(self, size: int, dtype: Any = "float32") -> OpenGLBuffer:
        """A new storage buffer of `size` elements (contents undefined)."""
        self._enter("alloc")
        return self._new_buffer(size, element_type(BACKEND, dtype, "alloc"), "alloc")

    def upload(self, array: Any) -> OpenGLBuffer:
        """A new storage buffer holding a copy of a C-contiguous numpy array (flattened)."""
        self._enter("upload")
        array = host_array(BACKEND, array, "upload")
        dtype = element_type(BACKEND, array.dtype, "upload")
        return self._new_buffer(array.size, dtype, "upload", array if array.size else None)

    def write(self, buffer: OpenGLBuffer, array: Any) -> None:
        """Copy a C-contiguous array into the start of `buffer` (glBufferSubData, in GL command order)."""
        self._enter("write")
        handle = self._own(buffer, "write")
        array = host_array(BACKEND, array, "write")
        if array.nbytes > buffer.nbytes:
            raise InvalidArgument(BACKEND, "write", detail=f"{array.nbytes} bytes into a buffer of {buffer.nbytes}")
        if array.nbytes:
            handle.write(array.reshape(-1).view(np.uint8))

    def download(self, buffer: OpenGLBuffer, out: Any = None) -> np.ndarray:
        """The buffer's contents as a new array, or copied into `out`; GL orders it after earlier dispatches."""
        if self._closed or threading.get_ident() != self._thread:
            self._enter("download")  # raises the right error
        self._make_current()
        handle = self._own(buffer, "download")
        if out is None:
            out = np.empty(buffer.size, numpy_dtype(buffer.dtype))
            handle.read_into(out)
        else:
            check_out(BACKEND, out, buffer.nbytes)
            if out.nbytes:
                handle.read_into(out.reshape(-1).view(np.uint8), out.nbytes)
        self._completion.completed = self._completion.submitted  # the read waited for all of it
        return out

    def _release_buffer(self, handle: Any) -> None:
        """Delete a GL buffer (called by OpenGLBuffer.close)."""
        if self._closed:
            return  # released with the context
        bound = self._bound
        if handle in bound:
            bound[:] = [None if current is handle else current for current in bound]
        if threading.get_ident() == self._thread:
            self._make_current()
            handle.release()
        # from another thread the buffer is freed with the context, when the device closes

    # -- pipelines and dispatch -------------------------------------------------------------------------

    def pipeline(
        self,
        code: str | bytes | Sequence[int],
        entry: str = "main",
        *,
        buffers: int,
        params: int = 0,
        workgroup_size: tuple[int, int, int] = (64, 1, 1),
    ) -> OpenGLPipeline:
        """Compile and link GLSL 430 `code` (cached per device) into a pipeline with `buffers` storage buffers."""
        self._enter("pipeline")
        code = source_text(BACKEND, code, "GLSL 430")
        if entry != "main":
            raise InvalidArgument(BACKEND, "pipeline", detail=f"GLSL compute shaders start at main, not {entry!r}")
        for name, value in (("buffers", buffers), ("params", params)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgument(BACKEND, "pipeline", detail=f"{name} must be an int >= 0, got {value!r}")
        if buffers > self.max_storage_blocks:
            raise InvalidArgument(BACKEND, "pipeline", detail=f"{buffers} storage buffers, over the device's "
                                  f"GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS {self.max_storage_blocks}")
        key = (code, buffers, params)
        program = self._programs.get(key)
        if program is None or program.released:
            program = Program(self.ctx, code, buffers, params)
            self._programs[key] = program
            evict_unused(self._programs, MAX_PROGRAMS)
        else:
            self._programs.move_to_end(key)
        return OpenGLPipeline(self, program, entry, tuple(workgroup_size))  # type: ignore[arg-type]

    def dispatch(
        self,
        pipeline: OpenGLPipeline,
        buffers: Sequence[OpenGLBuffer],
        groups: int | tuple[int, ...],
        params: Sequence[Any] = (),
    ) -> Submission:
        """Run `pipeline` over `groups` workgroups; returns at once with a Submission."""
        if self._closed or threading.get_ident() != self._thread:
            self._enter("dispatch")  # raises the right error
        self._make_current()
        program = pipeline.program if type(pipeline) is OpenGLPipeline and pipeline._device is self else None
        if program is None or program.shader is None:
            program = self._pipeline_error(pipeline)
        x, y, z = self._groups(groups)
        if len(buffers) != program.buffers:
            raise InvalidArgument(BACKEND, "dispatch",
                                  detail=f"the pipeline binds {program.buffers} buffers, got {len(buffers)}")
        handles: list[Any] = [buf.handle if type(buf) is OpenGLBuffer and buf._device is self else None
                              for buf in buffers]
        if None in handles:
            for buf in buffers:
                self._own(buf, "dispatch")  # raises for the first foreign or closed buffer
        data = pack_params(BACKEND, params, program.params) if program.params or params else b""
        bound = self._bound
        for slot, handle in enumerate(handles):
            if bound[slot] is not handle:
                handle.bind_to_storage_buffer(slot)
                bound[slot] = handle
        uniform = program.uniform
        if uniform is not None:
            if data != program.last_params:
                uniform.write(data)
                program.last_params = data
            if self._bound_uniform is not uniform:
                uniform.bind_to_uniform_block(0)
                self._bound_uniform = uniform
        program.shader.run(x, y, z)
        self.ctx.memory_barrier(self._barrier)
        completion = self._completion
        completion.submitted += 1
        return Submission(completion, completion.submitted)

    def _pipeline_error(self, pipeline: Any) -> Program:
        if not isinstance(pipeline, OpenGLPipeline):
            raise InvalidArgument(BACKEND, "dispatch", detail=f"not an opengl pipeline: {pipeline!r}")
        return pipeline.checked(self, "dispatch")

    def _groups(self, groups: Any) -> tuple[int, int, int]:
        """(x, y, z) workgroup counts, checked against the device's limits."""
        return workgroups(BACKEND, groups, self._group_limits, "dispatch", "GL_MAX_COMPUTE_WORK_GROUP_COUNT")

    def synchronize(self) -> None:
        """Wait for everything dispatched so far."""
        self._enter("synchronize")
        self._completion.reach(self._completion.submitted, None)

    # -- lifetime ---------------------------------------------------------------------------------------

    def _own(self, buffer: Any, op: str) -> Any:
        if not isinstance(buffer, OpenGLBuffer) or buffer._device is not self:
            raise InvalidArgument(BACKEND, op, detail=f"the buffer belongs to another device: {buffer!r}")
        handle = buffer.handle
        if handle is None:
            raise ClosedError(BACKEND, op, "buffer")
        return handle

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Finish outstanding work and destroy the context with every buffer and program; twice is a no-op."""
        if self._closed:
            return
        self._enter("close")
        try:
            self.ctx.finish()
        finally:
            self._completion.release()
            for program in self._programs.values():
                program.release()
            self._programs.clear()
            self._closed = True
            self._bound = []
            self._bound_uniform = None
            self.ctx.release()

    def __enter__(self) -> OpenGLDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<OpenGLDevice {self.descriptor.name}{' closed' if self._closed else ''}>"

