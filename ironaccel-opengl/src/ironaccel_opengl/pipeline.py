"""Compute programs from GLSL 430, checked against the binding contract, cached per device.

Contract: storage blocks at bindings 0..buffers-1 and, when the pipeline takes
params, a std140 uniform block at binding 0 holding them as 32-bit scalars.
The linked program is introspected so a shader that declares another layout
fails at `pipeline()` with InvalidArgument, not with wrong results later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ironaccel.errors import ClosedError, CompileError, InvalidArgument

if TYPE_CHECKING:
    from .device import OpenGLDevice

BACKEND = "opengl"
UNIFORM_ALIGN = 16


def compile_program(ctx: Any, code: str) -> Any:
    """moderngl's ComputeShader for `code`, or CompileError with the compiler's or linker's log."""
    try:
        return ctx.compute_shader(code)
    except Exception as exc:
        log = str(exc).strip() or type(exc).__name__
        op = "glLinkProgram" if "linker" in log.lower() else "glCompileShader"
        raise CompileError(BACKEND, op, log=log, code_name=type(exc).__name__) from None


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
    if problems:
        raise InvalidArgument(BACKEND, "pipeline", detail="the shader's interface does not match buffers="
                              f"{buffers}, params={params}: " + "; ".join(problems))


class Program:
    """A linked compute program and its params buffer, shared by Pipeline handles with the same key."""

    def __init__(self, ctx: Any, code: str, buffers: int, params: int):
        self.shader = compile_program(ctx, code)
        try:
            check_interface(self.shader, buffers, params)
        except InvalidArgument:
            self.shader.release()
            raise
        self.buffers = buffers
        self.params = params
        self.uniform: Any = None
        if params:
            self.uniform = ctx.buffer(reserve=-(-params * 4 // UNIFORM_ALIGN) * UNIFORM_ALIGN)
        self.last_params: bytes | None = None  # what the uniform buffer holds
        self.users = 0

    @property
    def released(self) -> bool:
        return self.shader is None

    def release(self) -> None:
        if self.shader is not None:
            self.shader.release()
            self.shader = None
        if self.uniform is not None:
            self.uniform.release()
            self.uniform = None


class OpenGLPipeline:
    """A handle on a linked Program; closing it leaves the Program cached for the next identical request."""

    __slots__ = ("entry", "buffers", "params", "workgroup_size", "program", "_device")

    def __init__(self, device: OpenGLDevice, program: Program, entry: str, workgroup_size: tuple[int, int, int]):
        self._device = device
        self.program: Program | None = program
        self.entry = entry
        self.buffers = program.buffers
        self.params = program.params
        self.workgroup_size = workgroup_size
        program.users += 1

    @property
    def device(self) -> OpenGLDevice:
        return self._device

    def checked(self, device: OpenGLDevice, op: str) -> Program:
        """The Program, if this pipeline belongs to `device` and is open."""
        if self._device is not device:
            raise InvalidArgument(BACKEND, op, detail="the pipeline belongs to another device")
        program = self.program
        if program is None or program.shader is None:
            raise ClosedError(BACKEND, op, "pipeline")
        return program

    def close(self) -> None:
        program, self.program = self.program, None
        if program is not None:
            program.users -= 1

    def __repr__(self) -> str:
        state = "closed" if self.program is None else f"buffers={self.buffers} params={self.params}"
        return f"<OpenGLPipeline {self.entry!r} {state}>"
