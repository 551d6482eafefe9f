"""The execution model on OpenGL: what GL has of it, and what it does not.

* Queues: a GL context is one in-order command stream, so the device has its default queue only
  (`create_queue` raises Unsupported saying so).
* Fences: the kit's `EmulatedFence` (a host-side timeline over the context's submission serials); waiting on
  one waits for its serial with a GL sync object (glFenceSync + glClientWaitSync, made on demand), so a
  signal costs a list append and no GL call.  A device-side wait is free: the one stream runs in order.
* Batches: GL has no command buffers.  A batch is recorded once into a list of resolved commands (vendor
  buffers, program, packed params, GL buffer names) and a submit replays it: one GL call sequence per command,
  the same calls `dispatch` makes, without the kit's per-call checks.  Reads copy into a staging buffer of
  the recording inside the stream and are read back when the submission has finished.
* Timestamps: glQueryCounter(GL_TIMESTAMP) before the first command and after each one (only where
  GL_QUERY_COUNTER_BITS for GL_TIMESTAMP is above 0).
* Memory kinds: "device" (glBufferData, moderngl) and "host" (glBufferStorage with persistent, coherent
  mapping: map(), np.asarray and DLPack (kDLCPU) see the memory itself).
* Interop: import_memory through GL_EXT_memory_object_fd (an opaque fd another API exported, e.g. Vulkan's;
  GL owns the fd once glImportMemoryFdEXT took it).  GL cannot export memory, and its semaphores
  (GL_EXT_semaphore_fd) are binary, not timelines, so export_memory and the fence hand-over are Unsupported.
"""

from __future__ import annotations

import ctypes
import os
import re
import stat
from collections.abc import Sequence
from typing import Any

import numpy as np

from ironaccel.compute.execution import Command
from ironaccel.compute.params import ConstantInfo
from ironaccel.errors import DriverError, InvalidArgument, OutOfMemory
from ironaccel.types import DType

BACKEND = "opengl"

GL_COPY_READ_BUFFER = 0x8F36
GL_COPY_WRITE_BUFFER = 0x8F37
GL_SHADER_STORAGE_BUFFER = 0x90D2
GL_R32UI = 0x8236
GL_RED_INTEGER = 0x8D94
GL_UNSIGNED_INT = 0x1405
GL_TIMESTAMP = 0x8E28
GL_QUERY_COUNTER_BITS = 0x8864
GL_QUERY_RESULT = 0x8866
GL_MAP_READ_BIT = 0x0001
GL_MAP_WRITE_BIT = 0x0002
GL_MAP_PERSISTENT_BIT = 0x0040
GL_MAP_COHERENT_BIT = 0x0080
GL_DYNAMIC_STORAGE_BIT = 0x0100
GL_CLIENT_STORAGE_BIT = 0x0200
GL_CLIENT_MAPPED_BUFFER_BARRIER_BIT = 0x4000
GL_UNIFORM = 0x92E1
GL_OFFSET = 0x92FC
GL_INVALID_INDEX = 0xFFFFFFFF
GL_OUT_OF_MEMORY = 0x0505
GL_DEDICATED_MEMORY_OBJECT_EXT = 0x9581
GL_HANDLE_TYPE_OPAQUE_FD_EXT = 0x9586
_GL_ERRORS = {0x0500: "GL_INVALID_ENUM", 0x0501: "GL_INVALID_VALUE", 0x0502: "GL_INVALID_OPERATION",
              0x0505: "GL_OUT_OF_MEMORY"}

_PERSISTENT = GL_MAP_READ_BIT | GL_MAP_WRITE_BIT | GL_MAP_PERSISTENT_BIT | GL_MAP_COHERENT_BIT


class HostBuffer:
    """A GL buffer with immutable storage, persistently and coherently mapped for its life ("host" memory).

    It answers the moderngl Buffer calls the device makes (bind, write, read_into, release) with raw GL calls.
    Its storage is a client-storage hint, and an ordered write is a copy from a staging buffer inside the stream:
    on NVIDIA's driver a glBufferSubData into a persistently mapped buffer was not seen through the mapping.
    """

    def __init__(self, calls: Any, nbytes: int, ctx: Any):
        self._calls, self._ctx = calls, ctx
        name = ctypes.c_uint(0)
        calls.gen_buffers(1, ctypes.byref(name))
        self.glo = name.value
        self.size = nbytes
        calls.get_error()  # what earlier work left set
        calls.bind_buffer(GL_COPY_WRITE_BUFFER, self.glo)
        flags = _PERSISTENT | GL_DYNAMIC_STORAGE_BIT | GL_CLIENT_STORAGE_BIT
        calls.buffer_storage(GL_COPY_WRITE_BUFFER, nbytes, None, flags)
        error = calls.get_error()
        self.address = calls.map_buffer_range(GL_COPY_WRITE_BUFFER, 0, nbytes, _PERSISTENT) if not error else None
        if error or not self.address:
            calls.delete_buffers(1, ctypes.byref(name))
            if error == GL_OUT_OF_MEMORY:
                raise OutOfMemory(BACKEND, "glBufferStorage", code=error, detail=f"{nbytes} bytes")
            raise DriverError(BACKEND, "glMapBufferRange" if not error else "glBufferStorage", code=error,
                              detail=f"persistent mapping of {nbytes} bytes")

    def bind_to_storage_buffer(self, slot: int) -> None:
        self._calls.bind_buffer_base(GL_SHADER_STORAGE_BUFFER, slot, self.glo)

    def write(self, data: Any, offset: int = 0) -> None:
        array = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        staging = self._ctx.buffer(array)
        try:
            self._calls.bind_buffer(GL_COPY_READ_BUFFER, staging.glo)
            self._calls.bind_buffer(GL_COPY_WRITE_BUFFER, self.glo)
            self._calls.copy_buffer_sub_data(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, 0, offset, array.nbytes)
        finally:
            staging.release()  # GL keeps its storage until the copy has run

    def read_into(self, out: np.ndarray, size: int, offset: int = 0) -> None:
        self._calls.bind_buffer(GL_COPY_READ_BUFFER, self.glo)
        self._calls.get_buffer_sub_data(GL_COPY_READ_BUFFER, offset, size, out.ctypes.data)

    def release(self) -> None:
        if self.glo:
            name = ctypes.c_uint(self.glo)
            self._calls.bind_buffer(GL_COPY_WRITE_BUFFER, self.glo)
            self._calls.unmap_buffer(GL_COPY_WRITE_BUFFER)
            self._calls.delete_buffers(1, ctypes.byref(name))
            self.glo = 0
            self.address = None


def check_memory_fd(fd: int, size: int) -> None:
    """InvalidArgument unless `fd` can be an exported allocation of `size` bytes: a memory file (Mesa's drivers
    export memfds) at least that large, or a device file (NVIDIA's opaque fds).  A pipe, socket or directory
    never is, and llvmpipe blocks reading a pipe, so GL never sees one."""
    try:
        info = os.fstat(fd)
    except OSError as exc:
        raise InvalidArgument(BACKEND, "import_memory", detail=f"the fd cannot be examined: {exc}") from None
    if stat.S_ISREG(info.st_mode):
        if info.st_size < size:
            raise InvalidArgument(BACKEND, "import_memory", detail=f"the fd's file holds {info.st_size} bytes, the "
                                  f"export says {size}")
        return
    if not stat.S_ISCHR(info.st_mode):
        raise InvalidArgument(BACKEND, "import_memory", detail="the fd is not exported memory (a pipe, socket or "
                              "directory); pass the fd another API's export_memory gave")


class ImportedBuffer:
    """A GL buffer over memory another API exported (GL_EXT_memory_object_fd): immutable storage without
    GL_DYNAMIC_STORAGE_BIT, so writes go through a staging buffer and a copy inside the stream."""

    def __init__(self, device: Any, fd: int, nbytes: int, ext: Any):
        calls = device._calls
        self._calls, self._ctx = calls, device.ctx
        memory, name = ctypes.c_uint(0), ctypes.c_uint(0)
        calls.get_error()  # what earlier work left set
        calls.create_memory_objects(1, ctypes.byref(memory))
        # A CUDA export is one whole physical allocation (cuMemCreate) and says dedicated=False for Vulkan's sake;
        # GL must import it as dedicated: with driver 580 a non-dedicated GL import read right but its
        # writes reached CUDA as garbage; dedicated is right both ways (bench/experiments/gl_cuda_import.py).
        dedicated = ctypes.c_int(1 if ext.dedicated or ext.backend == "cuda" else 0)
        calls.memory_object_parameteriv(memory.value, GL_DEDICATED_MEMORY_OBJECT_EXT, ctypes.byref(dedicated))
        calls.import_memory_fd(memory.value, int(ext.size), GL_HANDLE_TYPE_OPAQUE_FD_EXT, fd)  # GL owns fd now
        error = calls.get_error()
        op = "glImportMemoryFdEXT"
        if not error:
            calls.gen_buffers(1, ctypes.byref(name))
            calls.bind_buffer(GL_COPY_WRITE_BUFFER, name.value)
            calls.buffer_storage_mem(GL_COPY_WRITE_BUFFER, nbytes, memory.value, 0)
            error, op = calls.get_error(), "glBufferStorageMemEXT"
        if error:
            if name.value:
                calls.delete_buffers(1, ctypes.byref(name))
            calls.delete_memory_objects(1, ctypes.byref(memory))
            raise InvalidArgument(BACKEND, "import_memory", code=error, code_name=_GL_ERRORS.get(error),
                                  detail=f"{op} refused {nbytes} bytes of the fd's {ext.size} (an fd of another "
                                  "driver or device, or not an exported allocation)")
        self.glo, self.memory, self.size = name.value, memory.value, nbytes
        self.address = None

    def bind_to_storage_buffer(self, slot: int) -> None:
        self._calls.bind_buffer_base(GL_SHADER_STORAGE_BUFFER, slot, self.glo)

    def write(self, data: Any, offset: int = 0) -> None:
        array = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        staging = self._ctx.buffer(array)
        try:
            self._calls.bind_buffer(GL_COPY_READ_BUFFER, staging.glo)
            self._calls.bind_buffer(GL_COPY_WRITE_BUFFER, self.glo)
            self._calls.copy_buffer_sub_data(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, 0, offset, array.nbytes)
        finally:
            staging.release()  # GL keeps its storage until the copy has run

    def read_into(self, out: np.ndarray, size: int, offset: int = 0) -> None:
        self._calls.bind_buffer(GL_COPY_READ_BUFFER, self.glo)
        self._calls.get_buffer_sub_data(GL_COPY_READ_BUFFER, offset, size, out.ctypes.data)

    def release(self) -> None:
        if self.glo:
            name, memory = ctypes.c_uint(self.glo), ctypes.c_uint(self.memory)
            self._calls.delete_buffers(1, ctypes.byref(name))
            self._calls.delete_memory_objects(1, ctypes.byref(memory))
            self.glo = 0


def timestamp_bits(calls: Any) -> int:
    """GL_QUERY_COUNTER_BITS of GL_TIMESTAMP: 0 where the driver keeps no GPU timestamps."""
    if not calls.has("glGetQueryiv", "glQueryCounter", "glGenQueries", "glGetQueryObjectui64v"):
        return 0
    bits = ctypes.c_int(0)
    calls.get_queryiv(GL_TIMESTAMP, GL_QUERY_COUNTER_BITS, ctypes.byref(bits))
    calls.get_error()
    return int(bits.value)


# -- constants: GLSL #defines --------------------------------------------------------------------------------

_DEFAULT = re.compile(r"^[ \t]*#[ \t]*ifndef[ \t]+(\w+)[ \t]*\n[ \t]*#[ \t]*define[ \t]+\1[ \t]+([^\n]+?)[ \t]*\n"
                      r"[ \t]*#[ \t]*endif[^\n]*$", re.M)
_VERSION = re.compile(r"^[ \t]*#[ \t]*version[^\n]*\n", re.M)


def _literal_type(text: str) -> DType | None:
    text = text.strip().strip("()")
    if text in ("true", "false"):
        return DType.BOOL
    if re.fullmatch(r"[-+]?(0[xX][0-9a-fA-F]+|\d+)[uU]", text):
        return DType.UINT32
    if re.fullmatch(r"[-+]?(0[xX][0-9a-fA-F]+|\d+)", text):
        return DType.INT32
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?[fF]?", text):
        return DType.FLOAT32
    return None


def declared_constants(code: str) -> list[ConstantInfo]:
    """The constants GLSL code declares the way ironaccel reads them: a default under its own guard,
    ``#ifndef NAME`` / ``#define NAME value`` / ``#endif``."""
    found = []
    for match in _DEFAULT.finditer(code):
        text, dtype = match.group(2).strip(), _literal_type(match.group(2))
        value: Any = text
        bare = text.strip("()")
        if dtype is DType.BOOL:
            value = bare == "true"
        elif dtype in (DType.INT32, DType.UINT32):
            digits = bare.rstrip("uU")
            octal = len(digits.lstrip("+-")) > 1 and digits.lstrip("+-")[0] == "0" and digits.lstrip("+-")[1] in \
                "01234567"
            try:
                value = int(digits, 8) if octal else int(digits, 0)  # GLSL: a leading 0 is octal
            except ValueError:  # "09": not a GLSL integer either; the compiler will say so
                dtype = None
        elif dtype is DType.FLOAT32:
            value = float(bare.rstrip("fF"))
        found.append(ConstantInfo(match.group(1), None, dtype, value))
    return found


def without_defaults(code: str) -> str:
    """The code with its guarded constant defaults removed (so the params parser, which refuses macros, reads it)."""
    return _DEFAULT.sub("", code)


def _glsl_value(name: Any, value: Any, dtype: DType | None) -> str:
    if isinstance(value, (bool, np.bool_)):
        if dtype not in (None, DType.BOOL):
            raise InvalidArgument(BACKEND, "pipeline", detail=f"constant {name!r} is {dtype.value}, got {value!r}")
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        if dtype is DType.BOOL:
            raise InvalidArgument(BACKEND, "pipeline", detail=f"constant {name!r} is bool, got {value!r}")
        if dtype is DType.FLOAT32:
            return f"{float(value)!r}"
        if dtype is DType.UINT32:
            if not 0 <= int(value) < 1 << 32:
                raise InvalidArgument(BACKEND, "pipeline", detail=f"constant {name!r} is uint32, got {value!r}")
            return f"{int(value)}u"
        if not -(1 << 31) <= int(value) < 1 << 31:
            raise InvalidArgument(BACKEND, "pipeline", detail=f"constant {name!r} is int32, got {value!r}")
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if dtype not in (None, DType.FLOAT32):
            raise InvalidArgument(BACKEND, "pipeline", detail=f"constant {name!r} is {dtype.value}, got {value!r}")
        return f"{float(value)!r}"
    raise InvalidArgument(BACKEND, "pipeline", detail=f"constant {name!r} must be a bool, int or float, got "
                          f"{value!r}")


def specialize(code: str, constants: dict[Any, Any]) -> tuple[str, list[ConstantInfo]]:
    """(code with ``#define NAME value`` lines after ``#version``, the constants it declares).

    A GLSL program is compiled per constant set: a different set is a different program (cached by the kit).
    """
    declared = declared_constants(code)
    by_name = {c.name: c for c in declared}
    defines = []
    for name, value in constants.items():
        info = by_name.get(str(name))
        if info is None:
            raise InvalidArgument(BACKEND, "pipeline", detail=f"the code declares no constant {name!r} (it has "
                                  f"{', '.join(by_name) or 'none'}; declare one as #ifndef NAME / #define NAME "
                                  "default / #endif)")
        defines.append(f"#define {name} {_glsl_value(name, value, info.dtype)}\n")
    if not defines:
        return code, declared
    match = _VERSION.search(code)
    if match is None:
        raise InvalidArgument(BACKEND, "pipeline", detail="constants need a #version line to put them after")
    line = code.count("\n", 0, match.end()) + 1
    text = code[: match.end()] + "".join(defines) + f"#line {line}\n" + code[match.end():]
    return text, declared


# -- batches: a recording is the commands resolved for replay ---------------------------------------------------

class Recording:
    """A batch recorded for replay: (kind, arguments) per command, staging buffers of its reads, its queries."""

    def __init__(self, steps: list[tuple[Any, ...]], staging: dict[int, Any], queries: Any):
        self.steps = steps
        self.staging = staging
        self.queries = queries
        self.pending_reads: list[tuple[Any, np.ndarray, int]] = []


def record(device: Any, commands: Sequence[Command], timestamps: bool) -> Recording:
    """Resolve each command to the calls its replay makes."""
    steps: list[tuple[Any, ...]] = []
    staging: dict[int, Any] = {}
    try:
        for command in commands:
            steps.append(step(device, command, staging))
        queries = None
        if timestamps:
            count = len(commands) + 1
            queries = (ctypes.c_uint * count)()
            device._calls.gen_queries(count, queries)
    except BaseException:
        for buffer in staging.values():
            buffer.release()
        raise
    return Recording(steps, staging, queries)


def step(device: Any, command: Command, staging: dict[int, Any]) -> tuple[Any, ...]:
    kind = command.kind
    if kind == "dispatch":
        return ("dispatch", command.program, command.handles, command.dims, command.params)
    if kind == "copy":
        return ("copy", command.src.glo, command.dst.glo, command.src_offset, command.dst_offset, command.nbytes)
    if kind == "fill":
        return ("fill", command.dst.glo, command.offset, command.nbytes, ctypes.c_uint32(command.word))
    if kind == "write":
        data: Any = command.data
        return ("write", command.dst.glo, command.offset, command.nbytes, data, data.ctypes.data)
    buffer = staging.get(command.index)
    if buffer is None:
        buffer = staging[command.index] = device.ctx.buffer(reserve=command.nbytes)
    return ("read", command.src.glo, buffer, command.offset, command.nbytes, command.out)


def replay(device: Any, rec: Recording) -> int:
    """Issue the recording's GL calls in order; the serial of the submission."""
    calls = device._calls
    launch = device._launch
    copy, bind = calls.copy_buffer_sub_data, calls.bind_buffer
    queries = rec.queries
    counter = calls.query_counter if queries is not None else None
    if counter is not None:
        counter(queries[0], GL_TIMESTAMP)
    reads = []
    for index, step in enumerate(rec.steps):
        kind = step[0]
        if kind == "dispatch":
            launch(step[1], step[2], step[3], step[4])
        elif kind == "copy":
            bind(GL_COPY_READ_BUFFER, step[1])
            bind(GL_COPY_WRITE_BUFFER, step[2])
            copy(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, step[3], step[4], step[5])
        elif kind == "fill":
            bind(GL_COPY_WRITE_BUFFER, step[1])
            calls.clear_buffer_sub_data(GL_COPY_WRITE_BUFFER, GL_R32UI, step[2], step[3], GL_RED_INTEGER,
                                        GL_UNSIGNED_INT, ctypes.byref(step[4]))
        elif kind == "write":
            bind(GL_COPY_WRITE_BUFFER, step[1])
            calls.buffer_sub_data(GL_COPY_WRITE_BUFFER, step[2], step[3], step[5])
        else:
            bind(GL_COPY_READ_BUFFER, step[1])
            bind(GL_COPY_WRITE_BUFFER, step[2].glo)
            copy(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, step[3], 0, step[4])
            reads.append((step[2], step[5], step[4]))
        if counter is not None:
            counter(queries[index + 1], GL_TIMESTAMP)
    rec.pending_reads = reads
    serial = device._submitted = device._submitted + 1  # the submission's own serial, after its dispatches'
    return int(serial)


def finish(rec: Recording) -> None:
    """The submission finished: deliver its reads."""
    for buffer, out, nbytes in rec.pending_reads:
        buffer.read_into(out, nbytes)
    rec.pending_reads = []


def timings(calls: Any, rec: Recording) -> list[tuple[int, int]]:
    """(start, end) ns per command, from the recording's timestamp queries."""
    queries = rec.queries
    values = []
    value = ctypes.c_uint64(0)
    for query in queries:
        calls.get_query_object_ui64v(query, GL_QUERY_RESULT, ctypes.byref(value))
        values.append(int(value.value))
    return [(values[i], max(values[i], values[i + 1])) for i in range(len(values) - 1)]


def free(calls: Any, rec: Recording) -> None:
    for buffer in rec.staging.values():
        buffer.release()
    rec.staging = {}
    if rec.queries is not None:
        calls.delete_queries(len(rec.queries), rec.queries)
        rec.queries = None
