"""Compute programs from GLSL 430, checked against the binding contract, cached per device.

Contract: storage blocks at bindings 0..buffers-1 and, when the pipeline takes
params, a std140 uniform block at binding 0 holding them as 32-bit scalars.
The linked program is introspected so a shader that declares another layout
fails at `pipeline()` with InvalidArgument, not with wrong results later; the
source's `buffer` blocks give the element types and read-only bindings that
dispatch checks (`ironaccel.compute.glsl_interface`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from ironaccel.compute import Interface, PipelineHandle, Program, glsl_interface
from ironaccel.compute.params import ConstantInfo, ParamBlock
from ironaccel.errors import CompileError, InvalidArgument

BACKEND = "opengl"
UNIFORM_ALIGN = 16


def native(obj: Any, method: str) -> Any:
    """`obj.method` as moderngl's C object has it, where the Python wrapper only passes its arguments on (one
    Python call less on every dispatch); the wrapper itself where this moderngl has no such object.  Call it with
    every argument the wrapper would pass."""
    found = getattr(getattr(obj, "mglo", None), method, None)
    return found if found is not None else getattr(obj, method)


def clear_errors(ctx: Any) -> None:
    """Read GL's error flags until none is left, so no later check sees an error that is not its own."""
    for _ in range(16):
        if ctx.error == "GL_NO_ERROR":
            return


def compile_program(ctx: Any, code: str) -> Any:
    """moderngl's ComputeShader for `code`, or CompileError with the compiler's or linker's log."""
    try:
        return ctx.compute_shader(code)
    except Exception as exc:
        clear_errors(ctx)  # a failed compile or link may leave a GL error set
        log = str(exc).strip() or type(exc).__name__
        op = "glLinkProgram" if "linker" in log.lower() else "glCompileShader"
        raise CompileError(BACKEND, op, log=log, code_name=type(exc).__name__) from None


def params_bytes(params: int) -> int:
    """The size of the uniform buffer that holds `params` 32-bit params (whole std140 vec4s)."""
    return -(-params * 4 // UNIFORM_ALIGN) * UNIFORM_ALIGN


def check_interface(shader: Any, buffers: int, params: int) -> None:
    """InvalidArgument unless the shader's blocks fit `buffers` storage buffers and `params` scalars."""
    storage, uniform_blocks, plain = [], [], []
    for name, member in shader._members.items():
        kind = type(member).__name__
        if kind == "StorageBlock":
            storage.append((name, member.binding))
        elif kind == "UniformBlock":
            uniform_blocks.append((name, member.binding, member.size))
        elif kind == "Uniform":
            plain.append(name)
    problems = [f"storage block {n} at binding {b} (the pipeline binds 0..{buffers - 1})"
                for n, b in storage if not 0 <= b < buffers]
    if plain:
        problems.append(f"plain uniforms {', '.join(sorted(plain))} (ironaccel sets none: put params in a std140 "
                        "uniform block at binding 0)")
    for name, binding, size in uniform_blocks:
        if binding != 0:
            problems.append(f"uniform block {name} at binding {binding} (params use binding 0)")
        elif not params:
            problems.append(f"uniform block {name}, but the pipeline takes no params")
        elif size < params * 4:
            problems.append(f"uniform block {name} of {size} bytes, too small for {params} 32-bit params")
        elif size > params_bytes(params):  # the shader would read past the params buffer
            problems.append(f"uniform block {name} of {size} bytes, larger than the {params_bytes(params)} bytes "
                            f"that {params} 32-bit params fill")
    if problems:
        raise InvalidArgument(BACKEND, "pipeline", detail="the shader's interface does not match buffers="
                              f"{buffers}, params={params}: " + "; ".join(problems))


def check_typed_interface(shader: Any, buffers: int, block: ParamBlock, calls: Any) -> int:
    """InvalidArgument unless the linked program's blocks match `buffers` and the parsed params `block`: GL's
    own introspection (glGetProgramResourceiv) gives the uniform block's size and each member's offset, which
    must be the parser's.  The size of the uniform buffer the block needs."""
    storage, uniform_blocks, plain = [], [], []
    for name, member in shader._members.items():
        kind = type(member).__name__
        if kind == "StorageBlock":
            storage.append((name, member.binding))
        elif kind == "UniformBlock":
            uniform_blocks.append((name, member.binding, member.size))
        elif kind == "Uniform":
            plain.append(name)
    problems = [f"storage block {n} at binding {b} (the pipeline binds 0..{buffers - 1})"
                for n, b in storage if not 0 <= b < buffers]
    size = -(-block.size // UNIFORM_ALIGN) * UNIFORM_ALIGN
    for name, binding, gl_size in uniform_blocks:
        if binding != 0:
            problems.append(f"uniform block {name} at binding {binding} (params use binding 0)")
        elif gl_size > size:
            problems.append(f"uniform block {name} is {gl_size} bytes in GL, the parsed block {block.size}")
    if calls is not None and calls.has("glGetProgramResourceIndex", "glGetProgramResourceiv"):
        prop, offset = ctypes.c_uint(0x92FC), ctypes.c_int(-1)  # GL_OFFSET
        for field in block.fields:
            index = calls.get_program_resource_index(shader.glo, 0x92E1, field.name.encode())  # GL_UNIFORM
            if index == 0xFFFFFFFF:
                continue  # an instance-named block or an unused member: GL names it otherwise or not at all
            calls.get_program_resourceiv(shader.glo, 0x92E1, index, 1, ctypes.byref(prop), 1, None,
                                         ctypes.byref(offset))
            if offset.value >= 0 and offset.value != field.offset:
                problems.append(f"params member {field.name} is at offset {offset.value} in GL, {field.offset} "
                                "as parsed")
    if problems:
        raise InvalidArgument(BACKEND, "pipeline", detail="the shader's interface does not match: "
                              + "; ".join(problems))
    return size


class OpenGLProgram(Program):
    """A linked compute program and its params buffer, shared by pipeline handles with the same key."""

    def __init__(self, ctx: Any, code: str, buffers: int, params: int, block: ParamBlock | None = None,
                 calls: Any = None, constants: Sequence[ConstantInfo] = (), source: str | None = None):
        self.shader = compile_program(ctx, code)
        try:
            if block is not None:
                uniform_size = check_typed_interface(self.shader, buffers, block, calls)
                params = len(block.fields)
            else:
                check_interface(self.shader, buffers, params)
                uniform_size = params_bytes(params)
        except InvalidArgument:
            self.shader.release()
            clear_errors(ctx)
            raise
        super().__init__(buffers, params, Interface.of(buffers, glsl_interface(source or code), block, constants))
        self.uniform: Any = None
        self.write_params: Any = None  # the uniform buffer's write(data, offset)
        if params:
            # Zeroed, not reserved: a block member past the params given reads 0, not what the memory held.
            try:
                self.uniform = ctx.buffer(bytes(uniform_size))
            except BaseException:  # the linked shader goes now, not when the context is released
                self.shader.release()
                raise
            self.write_params = native(self.uniform, "write")
        self.last_params: bytes | None = None  # what the uniform buffer holds
        self.run = native(self.shader, "run")  # (x, y, z) workgroups

    def release(self) -> None:
        super().release()
        self.run = self.write_params = None  # a released program is never dispatched
        if self.shader is not None:
            self.shader.release()
            self.shader = None
        if self.uniform is not None:
            self.uniform.release()
            self.uniform = None


class OpenGLPipeline(PipelineHandle):
    """A handle on a linked OpenGLProgram; closing it leaves the program cached for the next identical request."""

    __slots__ = ()
