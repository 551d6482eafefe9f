"""A Level Zero ComputeDevice on the compute kit: a context, a compute command queue, device memory (USM),
SPIR-V modules and kernels.

Each submission is a command list recorded, closed and executed on the queue with a fence of its own; a
serial's fence says when it finished.  Uploads and downloads are memory copies on the same in-order queue,
so they follow earlier kernels.  Code is SPIR-V for OpenCL-style kernels (Kernel capability): the kernel is
found by its entry-point name (zeKernelCreate), its buffers are pointer arguments and its params are 32-bit
scalar arguments, in order (zeKernelSetArgumentValue), and the pipeline's workgroup size is the kernel's
group size (zeKernelSetGroupSize).  Kernel arguments are captured when a launch is appended, so one kernel
object serves every launch.
"""

from __future__ import annotations

import ctypes
from collections.abc import Hashable
from typing import Any

import numpy as np

from ironaccel.compute import BufferHandle, ComputeDeviceBase, PipelineHandle, Program, Submission
from ironaccel.errors import CompileError, InvalidArgument
from ironaccel.types import DeviceDescriptor, DType

from . import api
from .loader import BACKEND, check

_c = ctypes
SPIRV_MAGIC = 0x07230203


class LevelZeroBuffer(BufferHandle):
    __slots__ = ()


class LevelZeroPipeline(PipelineHandle):
    __slots__ = ()


class LevelZeroSubmission(Submission):
    __slots__ = ()


class Memory:
    """A USM allocation: its pointer and size."""

    __slots__ = ("ptr", "nbytes", "kind", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, kind: str = "device"):
        self.ptr, self.nbytes, self.kind = ptr, nbytes, kind


class KernelProgram(Program):
    """A module and the kernel of one entry point."""

    def __init__(self, device: LevelZeroDevice, module: int, kernel: int, buffers: int, params: int):
        super().__init__(buffers, params)
        self._device, self.module, self.kernel = device, module, kernel

    def release(self) -> None:
        if self.released:
            return
        super().release()
        self._device._destroy_kernel(self)


def spirv_bytes(code: Any, op: str = "pipeline") -> bytes:
    """SPIR-V as bytes (bytes, bytearray, memoryview or a uint32 array); InvalidArgument for anything else."""
    if isinstance(code, np.ndarray):
        if code.dtype != np.uint32 or code.ndim != 1:
            raise InvalidArgument(BACKEND, op, detail=f"SPIR-V as an array must be 1-D uint32, got {code.dtype} "
                                  f"with {code.ndim} dimensions")
        raw = np.ascontiguousarray(code).tobytes()
    elif isinstance(code, (bytes, bytearray, memoryview)):
        raw = bytes(code)
    else:
        raise InvalidArgument(BACKEND, op, detail=f"Level Zero code is SPIR-V (bytes), got {type(code).__name__}")
    if len(raw) < 20 or len(raw) % 4:
        raise InvalidArgument(BACKEND, op, detail=f"SPIR-V is whole 32-bit words, at least 5; got {len(raw)} bytes")
    if int.from_bytes(raw[:4], "little") != SPIRV_MAGIC:
        raise InvalidArgument(BACKEND, op, detail="not SPIR-V: it does not start with the magic number 0x07230203 "
                              "(little-endian)")
    return raw


class LevelZeroDevice(ComputeDeviceBase):
    """One Level Zero device: a context, a compute queue (group ordinal 0), USM device memory."""

    backend = BACKEND
    language = "SPIR-V (OpenCL kernels)"
    buffer_type = LevelZeroBuffer
    pipeline_type = LevelZeroPipeline
    submission_type = LevelZeroSubmission
    buffer_limit_name = "maxMemAllocSize"
    group_limit_name = "maxGroupCount"

    def __init__(self, lib: ctypes.CDLL, driver: int, device: int, descriptor: DeviceDescriptor, *,
                 max_alloc: int, group_limits: tuple[int, int, int], compute_ordinal: int):
        self._lib, self._driver, self._dev = lib, driver, device
        self._ordinal = compute_ordinal
        self._zctx: Any = None
        self._zq: Any = None
        self._pending: dict[int, tuple[int, int, Any]] = {}
        self._spare: list[tuple[int, int]] = []
        ctx = _c.c_void_p()
        check(lib.zeContextCreate(driver, _c.byref(api.ContextDesc()), _c.byref(ctx)), "zeContextCreate")
        self._zctx = ctx.value
        queue = _c.c_void_p()
        desc = api.CommandQueueDesc(ordinal=compute_ordinal, index=0, mode=api.QUEUE_MODE_ASYNCHRONOUS)
        try:
            check(lib.zeCommandQueueCreate(self._zctx, device, _c.byref(desc), _c.byref(queue)), "zeCommandQueueCreate")
        except BaseException:
            lib.zeContextDestroy(self._zctx)
            raise
        self._zq = queue.value
        self._open(descriptor, max_buffer_bytes=max_alloc, group_limits=group_limits)

    # -- submissions: one command list and one fence each ------------------------------------------------

    def _list_and_fence(self) -> tuple[int, int]:
        if self._spare:
            return self._spare.pop()
        lst, fence = _c.c_void_p(), _c.c_void_p()
        check(self._lib.zeCommandListCreate(self._zctx, self._dev, _c.byref(api.CommandListDesc(
            commandQueueGroupOrdinal=self._ordinal)), _c.byref(lst)), "zeCommandListCreate")
        code = self._lib.zeFenceCreate(self._zq, _c.byref(api.FenceDesc()), _c.byref(fence))
        if code:
            self._lib.zeCommandListDestroy(lst)
            check(code, "zeFenceCreate")
        return int(lst.value or 0), int(fence.value or 0)

    def _execute(self, record: Any, op: str, keep: Any = None) -> int:
        """Record a command list with `record(list)`, close it and run it on the queue; the new serial."""
        lib = self._lib
        lst, fence = self._list_and_fence()
        try:
            record(lst)
            check(lib.zeCommandListClose(lst), "zeCommandListClose")
            check(lib.zeCommandQueueExecuteCommandLists(self._zq, 1, _c.byref(_c.c_void_p(lst)), fence),
                  "zeCommandQueueExecuteCommandLists")
        except BaseException:
            lib.zeCommandListReset(lst)
            self._spare.append((lst, fence))
            raise
        self._submitted += 1
        self._pending[self._submitted] = (lst, fence, keep)
        return self._submitted

    def _wait(self, serial: int, seconds: float | None) -> bool:
        timeout = api.WAIT_FOREVER if seconds is None else int(seconds * 1e9)
        for s in sorted(k for k in self._pending if k <= serial):
            lst, fence, _ = self._pending[s]
            code = self._lib.zeFenceHostSynchronize(fence, timeout)
            if code == api.NOT_READY:
                return False
            check(code, "zeFenceHostSynchronize")
            del self._pending[s]
            self._lib.zeFenceReset(fence)
            self._lib.zeCommandListReset(lst)
            self._spare.append((lst, fence))
            self._completed = max(self._completed, s)
        self._completed = max(self._completed, serial)
        return True

    def _drain(self) -> None:
        if self._pending:
            self._wait(max(self._pending), None)

    # -- memory -------------------------------------------------------------------------------------------

    def _create_buffer(self, nbytes: int, dtype: DType, data: np.ndarray | None) -> Memory:
        out = _c.c_void_p()
        check(self._lib.zeMemAllocDevice(self._zctx, _c.byref(api.DeviceMemAllocDesc()), nbytes, 64, self._dev,
                                         _c.byref(out)), "zeMemAllocDevice")
        mem = Memory(int(out.value or 0), nbytes)
        if data is not None:
            try:
                self._write(mem, data)
            except BaseException:
                self._lib.zeMemFree(self._zctx, mem.ptr)
                raise
        return mem

    def _free_buffer(self, handle: Memory) -> None:
        self._drain()  # work in flight may still use it
        check(self._lib.zeMemFree(self._zctx, handle.ptr), "zeMemFree")

    def _copy(self, dst: int, src: int, nbytes: int, keep: Any) -> None:
        lib = self._lib
        serial = self._execute(lambda lst: check(lib.zeCommandListAppendMemoryCopy(lst, dst, src, nbytes, None, 0,
                                                                                   None),
                                                 "zeCommandListAppendMemoryCopy"), "copy", keep)
        self._wait(serial, None)

    def _write(self, handle: Memory, data: np.ndarray) -> None:
        self._copy(handle.ptr, data.ctypes.data, data.nbytes, data)

    def _read(self, handle: Memory, out: np.ndarray) -> None:
        self._copy(out.ctypes.data, handle.ptr, out.nbytes, out)

    # -- modules, kernels, launches ------------------------------------------------------------------------

    def _prepare(self, code: Any, entry: str) -> tuple[bytes, Hashable]:
        raw = spirv_bytes(code)
        return raw, raw

    def _build(self, code: bytes, entry: str, buffers: int, params: int,
               workgroup_size: tuple[int, int, int]) -> KernelProgram:
        lib = self._lib
        source = _c.create_string_buffer(code, len(code))
        desc = api.ModuleDesc(format=api.MODULE_FORMAT_IL_SPIRV, inputSize=len(code),
                              pInputModule=_c.cast(source, _c.c_void_p), pBuildFlags=b"")
        module, log = _c.c_void_p(), _c.c_void_p()
        result = lib.zeModuleCreate(self._zctx, self._dev, _c.byref(desc), _c.byref(module), _c.byref(log))
        text = self._log_text(log.value)
        if result:
            from .results import result_name
            raise CompileError(BACKEND, "zeModuleCreate", text or f"zeModuleCreate returned {result_name(result)}",
                               result, result_name(result))
        kernel = _c.c_void_p()
        try:
            check(lib.zeKernelCreate(module, _c.byref(api.KernelDesc(pKernelName=entry.encode())), _c.byref(kernel)),
                  f"zeKernelCreate({entry!r})")
            props = api.KernelProperties()
            check(lib.zeKernelGetProperties(kernel, _c.byref(props)), "zeKernelGetProperties")
            if props.numKernelArgs != buffers + params:
                raise InvalidArgument(BACKEND, "pipeline", detail=f"kernel {entry!r} takes {props.numKernelArgs} "
                                      f"arguments, not {buffers} buffers + {params} params")
            check(lib.zeKernelSetGroupSize(kernel, *workgroup_size), "zeKernelSetGroupSize")
        except BaseException:
            if kernel.value:
                lib.zeKernelDestroy(kernel)
            lib.zeModuleDestroy(module)
            raise
        return KernelProgram(self, int(module.value or 0), int(kernel.value or 0), buffers, params)

    def _log_text(self, log: int | None) -> str:
        if not log:
            return ""
        lib = self._lib
        try:
            size = _c.c_size_t(0)
            if lib.zeModuleBuildLogGetString(log, _c.byref(size), None) or not size.value:
                return ""
            text = _c.create_string_buffer(size.value)
            if lib.zeModuleBuildLogGetString(log, _c.byref(size), text):
                return ""
            return text.value.decode(errors="replace")
        finally:
            lib.zeModuleBuildLogDestroy(log)

    def _destroy_kernel(self, program: KernelProgram) -> None:
        if self._zq is None:
            return
        self._drain()
        self._lib.zeKernelDestroy(program.kernel)
        self._lib.zeModuleDestroy(program.module)

    def _set_args(self, program: KernelProgram, handles: list[Memory], params: bytes) -> None:
        lib, kernel = self._lib, program.kernel
        for i, mem in enumerate(handles):
            check(lib.zeKernelSetArgumentValue(kernel, i, 8, _c.byref(_c.c_void_p(mem.ptr))),
                  f"zeKernelSetArgumentValue(argument {i})")
        words = _c.create_string_buffer(params, max(len(params), 1))
        for j in range(len(params) // 4):
            check(lib.zeKernelSetArgumentValue(kernel, len(handles) + j, 4, _c.byref(words, 4 * j)),
                  f"zeKernelSetArgumentValue(argument {len(handles) + j})")

    def _launch(self, program: KernelProgram, handles: list[Memory], dims: tuple[int, int, int],
                params: bytes) -> int:
        self._set_args(program, handles, params)
        groups = api.GroupCount(*dims)
        lib = self._lib
        return self._execute(lambda lst: check(lib.zeCommandListAppendLaunchKernel(lst, program.kernel,
                                                                                   _c.byref(groups), None, 0, None),
                                               "zeCommandListAppendLaunchKernel"), "dispatch")

    def _shutdown(self) -> None:
        lib = self._lib
        if self._zq is None:
            return
        try:
            self._drain()
        finally:
            for lst, fence, _ in self._pending.values():
                self._spare.append((lst, fence))
            self._pending.clear()
            for lst, fence in self._spare:
                lib.zeFenceDestroy(fence)
                lib.zeCommandListDestroy(lst)
            self._spare.clear()
            lib.zeCommandQueueDestroy(self._zq)
            lib.zeContextDestroy(self._zctx)
            self._zq = self._zctx = None
