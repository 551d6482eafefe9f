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

import dataclasses
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from ironaccel.compute import ComputeDeviceBase
from ironaccel.compute.execution import Command
from ironaccel.compute.handles import SpareBuffers
from ironaccel.compute.params import glsl_params
from ironaccel.errors import InvalidArgument, OutOfMemory
from ironaccel.types import CapabilityFlags, DeviceDescriptor, DType

from . import execution as gx
from .context import GLCalls, KeepCurrent, create_context, make_current
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
    execution_features = frozenset({"fences", "batches", "timestamps", "typed_params", "constants", "map",
                                    "dlpack", "import_memory"})
    supported_memory = ("device", "host")
    bindable_memory = ("device", "host")

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
        self._extensions = set(self.ctx.extensions)
        features, kinds, self._missing = self._what_it_has(descriptor)
        if "timestamps" not in features and CapabilityFlags.TIMESTAMPS in descriptor.capabilities:
            descriptor = dataclasses.replace(descriptor, capabilities=descriptor.capabilities
                                             & ~CapabilityFlags.TIMESTAMPS)
        elif "timestamps" in features and CapabilityFlags.TIMESTAMPS not in descriptor.capabilities:
            descriptor = dataclasses.replace(descriptor, capabilities=descriptor.capabilities
                                             | CapabilityFlags.TIMESTAMPS)
        if "host" in kinds:  # shader writes to persistently mapped buffers reach the host's view
            self._barrier |= gx.GL_CLIENT_MAPPED_BUFFER_BARRIER_BIT
        self._open(descriptor, max_buffer_bytes=int(info["GL_MAX_SHADER_STORAGE_BLOCK_SIZE"]),
                   group_limits=self.max_groups, max_buffers=self.max_storage_blocks,
                   max_params=int(info["GL_MAX_UNIFORM_BLOCK_SIZE"]) // 4,
                   thread_bound=make_current(self.ctx), features=features, memory_kinds=kinds)

    def _what_it_has(self, descriptor: DeviceDescriptor) -> tuple[set[str], tuple[str, ...], dict[str, str]]:
        """(features, memory kinds, why-not by feature) from the GL entry points and extensions this context has."""
        calls = self._calls
        features = set(self.execution_features)
        missing: dict[str, str] = {}
        if not calls.has("glBindBuffer", "glCopyBufferSubData", "glClearBufferSubData", "glBufferSubData"):
            features.discard("batches")
            missing["batches"] = f"this GL lacks {', '.join(calls.missing) or 'glFenceSync'}"
        if gx.timestamp_bits(calls) <= 0 or "batches" not in features:
            features.discard("timestamps")
            missing["timestamps"] = "GL_QUERY_COUNTER_BITS of GL_TIMESTAMP is 0 on this driver: no GPU timestamps"
        features.discard("import_memory")
        if "GL_EXT_memory_object_fd" in self._extensions and calls.has(
                "glCreateMemoryObjectsEXT", "glImportMemoryFdEXT", "glBufferStorageMemEXT", "glCopyBufferSubData"):
            features.add("import_memory")
        kinds: tuple[str, ...] = ("device",)
        storage = self.ctx.version_code >= 440 or "GL_ARB_buffer_storage" in self._extensions
        if storage and calls.has("glBufferStorage", "glMapBufferRange", "glGenBuffers"):
            kinds = ("device", "host")
        else:
            features -= {"map", "dlpack"}
            missing["map"] = missing["dlpack"] = "no persistent mapping: GL 4.4 or GL_ARB_buffer_storage is missing"
        return features, kinds, missing

    def _unsupported_reason(self, feature: str) -> str:
        if feature in self._missing:
            return self._missing[feature]
        if feature == "queues" or feature == "fences on several queues":
            return "a GL context is one in-order command stream: the device has its default queue only"
        if feature == "export_memory":
            return "OpenGL cannot export memory (GL_EXT_memory_object_fd imports only): allocate it where it " \
                   "can be exported (Vulkan, CUDA) and import_memory() it here"
        if feature == "import_memory":
            return "GL_EXT_memory_object_fd is missing on this driver"
        if feature in ("export_fence", "import_fence"):
            have = "GL_EXT_semaphore_fd" in self._extensions
            return ("GL_EXT_semaphore_fd is missing on this driver" if not have else
                    "GL semaphores (GL_EXT_semaphore_fd) are binary, not timelines: fences are not exported")
        return super()._unsupported_reason(feature)

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
        if type(handle) in (gx.HostBuffer, gx.ImportedBuffer):
            return False  # not a plain device buffer: freed, never handed out again as one
        return self._spare.keep(handle, handle.size)

    def _keep_current(self) -> KeepCurrent:
        return KeepCurrent()

    def _free_buffer(self, handle: Any) -> None:
        self._bound_list = None
        bound = self._bound
        for slot, current in enumerate(bound):
            if current is handle:  # GL may give its name to the next buffer: that one must be bound anew
                bound[slot] = None
        handle.release()

    def _write(self, handle: Any, data: np.ndarray) -> None:
        handle.write(data)
        if type(handle) in (gx.HostBuffer, gx.ImportedBuffer):
            # A copy from staging the GPU runs later: a serial of its own, so synchronize() and map() wait for it
            # (another API reading imported memory, or the host reading a mapping, would see it half done).
            self._submitted += 1

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
        return self._compile(code, entry, buffers, params, workgroup_size, {})

    def _compile(self, code: str, entry: str, buffers: int, params: int | None,
                 workgroup_size: tuple[int, int, int], constants: dict[str | int, Any]) -> OpenGLProgram:
        """Typed params from the code's uniform block (parsed, then checked against GL's introspection);
        constants as #defines after #version, so each constant set is a program of its own."""
        text, declared = gx.specialize(code, constants)
        source = gx.without_defaults(code) if declared else code
        found = glsl_params(source)
        block = None
        if found is not None and found[0] == 0 and (params is None or params == len(found[1].fields)):
            block = found[1]
        return OpenGLProgram(self.ctx, text, buffers, 0 if params is None and block is None else params or 0,
                             block, self._calls, declared, source)

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
            # A bind plus the lookup would save only a fraction of a glBufferSubData, itself cheap; not done.
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

    # -- the execution model: batches, timestamps, host memory (see `execution`) ---------------------------

    def _record(self, commands: Sequence[Command], timestamps: bool) -> gx.Recording:
        return gx.record(self, commands, timestamps)

    def _update(self, rec: gx.Recording, index: int, command: Command) -> bool:
        if command.kind == "read":
            return False
        rec.steps[index] = gx.step(self, command, rec.staging)  # a replay reads the step as it is at submit
        return True

    def _submit(self, vq: Any, rec: gx.Recording, waits: list[tuple[Any, int]],
                signals: list[tuple[Any, int]]) -> int:
        return gx.replay(self, rec)

    def _finish(self, rec: gx.Recording, serial: int) -> None:
        gx.finish(rec)

    def _timings(self, rec: gx.Recording, serial: int) -> list[tuple[int, int]]:
        return gx.timings(self._calls, rec)

    def _free_recording(self, rec: gx.Recording) -> None:
        gx.free(self._calls, rec)

    def _create_memory(self, nbytes: int, dtype: DType, memory: str, exportable: bool) -> Any:
        if exportable:
            raise self._unsupported("alloc", "export_memory")
        if memory == "device":
            return self._create_buffer(nbytes, dtype, None)
        return gx.HostBuffer(self._calls, nbytes, self.ctx)

    def _import_memory(self, fd: int, nbytes: int, dtype: DType, ext: Any) -> gx.ImportedBuffer:
        gx.check_memory_fd(fd, ext.size)  # before GL: a driver may block reading a pipe, or fault on a file
        return gx.ImportedBuffer(self, fd, nbytes, ext)

    def _memory_of(self, handle: Any) -> tuple[bool, bool]:
        host = type(handle) is gx.HostBuffer
        return host, host

    def _map(self, handle: Any, write: bool) -> Any:
        self._completion.wait(self._submitted, None)  # the host sees what earlier work wrote
        self._completed = self._submitted
        return handle.address

    def _shutdown(self) -> None:
        self._completion.release()
        self._completed = self._submitted
        self._bound = []
        self._bound_list = None
        self._bound_uniform = None
        self._spare.clear()
        self.ctx.release()  # deletes every buffer still open
