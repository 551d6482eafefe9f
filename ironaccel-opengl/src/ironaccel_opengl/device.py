"""OpenGLDevice: ironaccel's ComputeDevice on a headless EGL OpenGL 4.3 context -- the GL calls under the kit.

GL executes commands in issue order, so every call is ordered after the ones
before it.  After each dispatch a memory barrier (shader storage + buffer
update) makes the shader's writes visible to later dispatches and to reads.
A GL context is current on one thread at a time: a device is used from the
thread that opened it, and it makes its context current on every call, so
several devices (or other moderngl code) can share that thread.  The checks,
handles, cache and waiting are `ironaccel.compute.ComputeDeviceBase`'s.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from ironaccel.compute import ComputeDeviceBase
from ironaccel.errors import InvalidArgument, OutOfMemory
from ironaccel.types import DeviceDescriptor, DType

from .context import GLCalls, create_context
from .memory import OpenGLBuffer
from .pipeline import OpenGLPipeline, OpenGLProgram, clear_errors
from .submission import Completion, OpenGLSubmission

BACKEND = "opengl"


class OpenGLDevice(ComputeDeviceBase):
    """A ComputeDevice on an OpenGL 4.3 context; code is GLSL 430 compute shaders."""

    backend = BACKEND
    language = "GLSL 430"
    buffer_type = OpenGLBuffer
    pipeline_type = OpenGLPipeline
    submission_type = OpenGLSubmission
    buffer_limit_name = "GL_MAX_SHADER_STORAGE_BLOCK_SIZE"
    group_limit_name = "GL_MAX_COMPUTE_WORK_GROUP_COUNT"
    binding_limit_name = "GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS"

    def __init__(self, moderngl: Any, descriptor: DeviceDescriptor):
        self.ctx = create_context(moderngl)
        self._calls = GLCalls(self.ctx)
        info = self.ctx.info
        self.max_groups = tuple(int(v) for v in info["GL_MAX_COMPUTE_WORK_GROUP_COUNT"])
        self.max_storage_blocks = int(info["GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS"])
        self._barrier = moderngl.SHADER_STORAGE_BARRIER_BIT | moderngl.BUFFER_UPDATE_BARRIER_BIT
        self._completion = Completion(self, self._calls)
        self._bound: list[Any] = [None] * self.max_storage_blocks  # moderngl Buffer bound at each SSBO binding
        self._bound_uniform: Any = None
        self._open(descriptor, max_buffer_bytes=int(info["GL_MAX_SHADER_STORAGE_BLOCK_SIZE"]),
                   group_limits=self.max_groups, max_buffers=self.max_storage_blocks,
                   thread_bound=self.ctx.mglo.__enter__)

    # -- context ----------------------------------------------------------------------------------------

    def _thread_detail(self) -> str:
        return "an OpenGL device is used from the thread that opened it (its EGL context is current there)"

    # -- memory -----------------------------------------------------------------------------------------

    def _create_buffer(self, nbytes: int, dtype: DType, data: np.ndarray | None) -> Any:
        ctx = self.ctx
        clear_errors(ctx)  # the check below must see this call's error, not an older one
        handle = ctx.buffer(data) if data is not None else ctx.buffer(reserve=nbytes)
        error = ctx.error
        if error != "GL_NO_ERROR":
            handle.release()
            clear_errors(ctx)
            if error == "GL_OUT_OF_MEMORY":
                raise OutOfMemory(BACKEND, "glBufferData", code_name=error, detail=f"{nbytes} bytes")
            raise InvalidArgument(BACKEND, "glBufferData", code_name=error, detail=f"{nbytes} bytes")
        return handle

    def _free_buffer(self, handle: Any) -> None:
        bound = self._bound
        if handle in bound:
            bound[:] = [None if current is handle else current for current in bound]
        handle.release()

    def _write(self, handle: Any, data: np.ndarray) -> None:
        handle.write(data)

    def _read(self, handle: Any, out: np.ndarray) -> None:
        handle.read_into(out, out.size)
        self._completed = self._submitted  # the read waited for all of it

    # -- pipelines and dispatch -------------------------------------------------------------------------

    def _prepare(self, code: Any, entry: str) -> tuple[Any, Hashable]:
        if entry != "main":
            raise InvalidArgument(BACKEND, "pipeline", detail=f"GLSL compute shaders start at main, not {entry!r}")
        return super()._prepare(code, entry)

    def _build(self, code: str, entry: str, buffers: int, params: int,
               workgroup_size: tuple[int, int, int]) -> OpenGLProgram:
        return OpenGLProgram(self.ctx, code, buffers, params)

    def _launch(self, program: OpenGLProgram, handles: list[Any], dims: tuple[int, int, int],
                params: bytes) -> int:
        bound = self._bound
        for slot, handle in enumerate(handles):
            if bound[slot] is not handle:
                handle.bind_to_storage_buffer(slot)
                bound[slot] = handle
        uniform = program.uniform
        if uniform is not None:
            if params != program.last_params:
                uniform.write(params)
                program.last_params = params
            if self._bound_uniform is not uniform:
                uniform.bind_to_uniform_block(0)
                self._bound_uniform = uniform
        program.shader.run(*dims)
        self.ctx.memory_barrier(self._barrier)
        self._submitted += 1
        return self._submitted

    def _wait(self, serial: int, seconds: float | None) -> bool:
        return self._completion.wait(serial, seconds)

    def _shutdown(self) -> None:
        self._completion.release()
        self._completed = self._submitted
        self._bound = []
        self._bound_uniform = None
        self.ctx.release()  # deletes every buffer still open
