"""Translation of wgpu-py exceptions into ironaccel's typed errors, naming the op."""

from __future__ import annotations

from ironaccel.errors import CompileError, DriverError, InvalidArgument, OutOfMemory

BACKEND = "webgpu"


def translate(exc: BaseException, op: str) -> DriverError:
    """The ironaccel error for a wgpu exception raised by `op` (a wgpu-native function name)."""
    kind = type(exc).__name__
    message = str(exc).strip()
    if kind == "GPUOutOfMemoryError" or "out of memory" in message.lower():
        return OutOfMemory(BACKEND, op, code_name=kind, detail=message)
    if kind == "GPUValidationError":
        return InvalidArgument(BACKEND, op, code_name=kind, detail=message)
    return DriverError(BACKEND, op, code_name=kind, detail=message or kind)


def compile_error(exc: BaseException, op: str) -> CompileError:
    """A CompileError carrying the shader compiler's (naga's) message as the log."""
    return CompileError(BACKEND, op, log=str(exc).strip() or type(exc).__name__, code_name=type(exc).__name__)
