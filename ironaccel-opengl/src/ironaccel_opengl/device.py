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
from ironaccel.compute.handles import SpareBuffers
from ironaccel.errors import InvalidArgument, OutOfMemory
from ironaccel.types import DeviceDescriptor, DType

from .context import GLCalls, create_context, make_current
from .memory import OpenGLBuffer
from .pipeline import OpenGLPipeline, OpenGLProgram, clear_errors, native
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
    params_limit_name = "GL_MAX_UNIFORM_BLOCK_SIZE / 4"
    any_array = True  # moderngl takes any buffer-protocol object

    def __init__(self, moderngl: Any, descriptor: DeviceDescriptor):
        self.ctx = create_context(moderngl)
        self._calls = GLCalls(self.ctx)
        info = self.ctx.info
        self.max_groups = tuple(int(v) for v in info["GL_MAX_COMPUTE_WORK_GROUP_COUNT"])
        self.max_storage_blocks = int(info["GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS"])
        self._barrier = moderngl.SHADER_STORAGE_BARRIER_BIT | moderngl.BUFFER_UPDATE_BARRIER_BIT
        self._memory_barrier = native(self.ctx, "memory_barrier")  # (barriers, by_region)
        self._completion = Completion(self, self._calls)
        # The moderngl Buffer bound at each SSBO binding a dispatch used so far (a list as long as the most
        # buffers one dispatch bound, so freeing a buffer scans only those).
        self._bound: list[Any] = []
        self._bound_list: list[Any] | None = None  # the handles list `_bound` was last brought up to date with
        self._bound_uniform: Any = None
        self._spare = SpareBuffers()  # closed small buffers: they keep their SSBO bindings
        self._open(descriptor, max_buffer_bytes=int(info["GL_MAX_SHADER_STORAGE_BLOCK_SIZE"]),
                   group_limits=self.max_groups, max_buffers=self.max_storage_blocks,
                   max_params=int(info["GL_MAX_UNIFORM_BLOCK_SIZE"]) // 4,
                   thread_bound=make_current(self.ctx))

    # -- context ----------------------------------------------------------------------------------------

    def _thread_detail(self) -> str:
        return "an OpenGL device is used from the thread that opened it (its EGL context is current there)"

    # -- memory -----------------------------------------------------------------------------------------

    def _create_buffer(self, nbytes: int, dtype: DType, data: np.ndarray | None) -> Any:
        handle = self._spare.take(nbytes)
        if handle is not None:
            if data is not None:
                handle.write(data)
            return handle
        ctx = self.ctx
        handle = ctx.buffer(data) if data is not None else ctx.buffer(reserve=nbytes)
        if ctx.error == "GL_NO_ERROR":
            return handle
        # An error, this call's or one left set by earlier GL work: clear them all and try once more, so the
        # check sees this call's error alone (one glGetError a buffer, where clearing first took two).
        handle.release()
        clear_errors(ctx)
        handle = ctx.buffer(data) if data is not None else ctx.buffer(reserve=nbytes)
        error = ctx.error
        if error != "GL_NO_ERROR":
            handle.release()
            clear_errors(ctx)
            if error == "GL_OUT_OF_MEMORY":
                raise OutOfMemory(BACKEND, "glBufferData", code_name=error, detail=f"{nbytes} bytes")
            raise InvalidArgument(BACKEND, "glBufferData", code_name=error, detail=f"{nbytes} bytes")
        return handle

    def _recycle(self, handle: Any) -> bool:
        return self._spare.keep(handle, handle.size)

    def _free_buffer(self, handle: Any) -> None:
        self._bound_list = None
        bound = self._bound
        for slot, current in enumerate(bound):
            if current is handle:  # GL may give its name to the next buffer: that one must be bound anew
                bound[slot] = None
        handle.release()

    def _write(self, handle: Any, data: np.ndarray) -> None:
        handle.write(data)

    def _read(self, handle: Any, out: np.ndarray) -> None:
        handle.read_into(out, out.nbytes)
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
        if handles is not self._bound_list:  # else the kit's kept list of the buffers bound last: still bound
            bound = self._bound
            if len(bound) < len(handles):
                bound.extend([None] * (len(handles) - len(bound)))
            for slot, handle in enumerate(handles):
                if bound[slot] is not handle:
                    handle.bind_to_storage_buffer(slot)
                    bound[slot] = handle
            self._bound_list = handles
        uniform = program.uniform
        if uniform is not None:
            # Weighed: uniform buffers kept per params value, bound instead of written when params repeat.
            # glBufferSubData 0.40 us against glBindBufferBase 0.12 + a lookup (LP_NUM_THREADS=0): ~0.17 us; not done.
            if params != program.last_params:
                program.write_params(params, 0)
                program.last_params = params
            if self._bound_uniform is not uniform:
                uniform.bind_to_uniform_block(0)
                self._bound_uniform = uniform
        program.run(*dims)
        self._memory_barrier(self._barrier, False)
        serial = self._submitted = self._submitted + 1
        return serial

    def _wait(self, serial: int, seconds: float | None) -> bool:
        return self._completion.wait(serial, seconds)

    def _shutdown(self) -> None:
        self._completion.release()
        self._completed = self._submitted
        self._bound = []
        self._bound_list = None
        self._bound_uniform = None
        self._spare.clear()
        self.ctx.release()  # deletes every buffer still open
