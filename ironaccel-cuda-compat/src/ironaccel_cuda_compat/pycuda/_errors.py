"""PyCUDA's exception classes, which are also ironaccel's typed errors.

`Error` (PyCUDA's base) is an `ironaccel.errors.DriverError`; `MemoryError`,
`LogicError`, `LaunchError` and `RuntimeError` derive from it, as in PyCUDA,
and CUDA result codes map onto them as PyCUDA's C++ layer maps them.  What is
raised is a class that derives from both the PyCUDA class and the ironaccel
class for the same code (`OutOfMemory`, `InvalidArgument`, `InvalidState`,
...), so `except drv.LogicError` and `except ironaccel.InvalidArgument` both
catch an invalid value, and the error carries `op`, `code` and `code_name`.
`str()` is PyCUDA's text: "cuMemAlloc failed: out of memory".  Input that
PyCUDA rejects with a plain `TypeError` or `ValueError` raises a `LogicError`
that is also that built-in.
"""

from __future__ import annotations

import builtins
from typing import Any

from ironaccel import errors as ia

BACKEND = "cuda"

__all__ = [
    "Error", "MemoryError", "LogicError", "LaunchError", "RuntimeError", "CompileError",
    "from_code", "translate", "invalid", "bad_type", "unsupported", "no_arrays",
]


class Error(ia.DriverError):
    """pycuda.driver.Error: a failed CUDA call (also an ironaccel DriverError)."""

    def __init__(self, *args: Any, op: str | None = None, code: int | None = None, code_name: str | None = None,
                 detail: str | None = None):
        text = str(args[0]) if args else (detail or "")
        Exception.__init__(self, *args)  # not the cooperative chain: the other bases' __init__ take other arguments
        self.message = text
        self.backend = BACKEND
        self.op = op or ""
        self.code = code
        self.code_name = code_name
        self.detail = detail
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __reduce__(self) -> Any:
        return (_restore, (_pycuda_base(type(self)).__name__, _ironaccel_base(type(self)), self.args,
                           {"op": self.op, "code": self.code, "code_name": self.code_name, "detail": self.detail}))


class MemoryError(Error):
    """pycuda.driver.MemoryError: the device ran out of memory."""


class LogicError(Error):
    """pycuda.driver.LogicError: the call was wrong (bad value, handle or context)."""


class LaunchError(Error):
    """pycuda.driver.LaunchError: a kernel launch failed."""


class RuntimeError(Error):
    """pycuda.driver.RuntimeError: no device, no binary for this GPU, not ready, ..."""


class CompileError(Error, ia.CompileError):
    """pycuda.driver.CompileError: compilation failed (also ironaccel's CompileError, whose `log` is set)."""

    def __init__(self, msg: str, command_line: Any, stdout: str | None = None, stderr: str | None = None):
        self.msg = msg
        self.command_line = command_line
        self.stdout = stdout
        self.stderr = stderr
        self.log = stderr or stdout or ""
        Error.__init__(self, msg, op="nvrtcCompileProgram", detail=self.log or msg)
        self.args = (msg, command_line, stdout, stderr)
        self.text = self._format()

    def _format(self) -> str:
        result = self.msg
        if self.command_line:
            result += "\n[command: {}]".format(" ".join(str(c) for c in self.command_line))
        if self.stdout:
            result += f"\n[stdout:\n{self.stdout}]"
        if self.stderr:
            result += f"\n[stderr:\n{self.stderr}]"
        return result

    def __reduce__(self) -> Any:
        return (CompileError, self.args)


_PYCUDA_CLASSES = (MemoryError, LogicError, LaunchError, RuntimeError, Error)
_LAUNCH = {701, 702, 703, 719}  # LAUNCH_OUT_OF_RESOURCES, _TIMEOUT, _INCOMPATIBLE_TEXTURING, LAUNCH_FAILED
_MEMORY = {2}
_RUNTIME = {100, 209, 214, 301, 600}  # NO_DEVICE, NO_BINARY_FOR_GPU, ECC_UNCORRECTABLE, FILE_NOT_FOUND, NOT_READY
_UNKNOWN = 999


def pycuda_class(code: int) -> type[Error]:
    """The PyCUDA class PyCUDA raises for CUDA result `code`."""
    if code in _LAUNCH:
        return LaunchError
    if code in _MEMORY:
        return MemoryError
    if code in _RUNTIME:
        return RuntimeError
    if code == _UNKNOWN:
        return Error
    return LogicError


_combos: dict[tuple[type, ...], type] = {}


def combo(pycuda_cls: type[Error], *others: type[BaseException]) -> type:
    """The class deriving from `pycuda_cls` and from `others` (ironaccel classes, built-ins), made once."""
    bases = (pycuda_cls, *[c for c in others if not issubclass(pycuda_cls, c)])
    if len(bases) == 1:
        return pycuda_cls
    cls = _combos.get(bases)
    if cls is None:
        namespace = {"__module__": pycuda_cls.__module__, "__qualname__": pycuda_cls.__qualname__,
                     "__doc__": pycuda_cls.__doc__}
        cls = type(pycuda_cls.__name__, bases, namespace)
        _combos[bases] = cls
    return cls


def _pycuda_base(cls: type) -> type:
    for base in cls.__mro__:
        if base in _PYCUDA_CLASSES:
            return base
    return Error


def _ironaccel_base(cls: type) -> str | None:
    for base in cls.__mro__:
        if base.__module__ == ia.__name__ and base is not ia.DriverError:
            return base.__name__
    return None


def _restore(pycuda_name: str, ironaccel_name: str | None, args: tuple[Any, ...], fields: dict[str, Any]) -> Error:
    pc = next(c for c in _PYCUDA_CLASSES if c.__name__ == pycuda_name)
    cls: Any = combo(pc, getattr(ia, ironaccel_name)) if ironaccel_name else pc
    exc = cls.__new__(cls)
    Error.__init__(exc, *args, **fields)
    return exc


def from_code(code: int, routine: str, detail: str | None = None, *, op: str | None = None) -> Error:
    """The error PyCUDA raises when `routine` returns `code` ("routine failed: text[ - detail]").

    `op` is the driver call that actually ran (defaults to `routine`); the
    ironaccel class and the hints come from ironaccel's own mapping.
    """
    from ironaccel_cuda.errors import code_string, driver_error

    code = int(code)
    real = op or routine
    base = driver_error(code, real, detail)
    cls = combo(pycuda_class(code), type(base))
    text = f"{routine} failed: {code_string(code) or base.code_name}"
    if detail:
        text += f" - {detail}"
    return cls(text, op=real, code=code, code_name=base.code_name, detail=base.detail)


def translate(exc: BaseException, routine: str) -> BaseException:
    """The PyCUDA-style error for an error raised below the compat layer while running `routine`."""
    if isinstance(exc, Error):
        return exc
    if isinstance(exc, ia.DriverError):
        if exc.code is not None:
            return from_code(exc.code, routine, op=exc.op)
        cls = combo(LogicError, type(exc))
        return _copy(cls(f"{routine} failed: {exc.detail or exc.message}", op=exc.op, detail=exc.detail), exc)
    if isinstance(exc, ia.NotAvailable):
        pc = pycuda_class(exc.code) if exc.code is not None else RuntimeError
        cls = combo(pc, ia.NotAvailable)
        return _copy(cls(f"{routine} failed: {exc.reason}", op=routine, code=exc.code, code_name=exc.code_name,
                         detail=exc.reason), exc)
    if isinstance(exc, ia.Unsupported):
        cls = combo(LogicError, ia.Unsupported)
        return _copy(cls(f"{routine} failed: {exc.message}", op=exc.op or routine, detail=exc.message), exc)
    if isinstance(exc, (TypeError, ValueError, OverflowError, BufferError)):
        return bad_input(routine, exc)
    return exc


def _copy(new: Error, old: BaseException) -> Error:
    for key, value in vars(old).items():
        if key not in ("message", "args", "text"):
            new.__dict__.setdefault(key, value)
    return new


def invalid(routine: str, detail: str, *builtin: type[BaseException]) -> Error:
    """Input rejected before any driver call: a LogicError that is also InvalidArgument (and `builtin`)."""
    cls = combo(LogicError, ia.InvalidArgument, *builtin)
    return cls(f"{routine} failed: {detail}", op=routine, detail=detail)


def bad_type(routine: str, detail: str) -> Error:
    """What PyCUDA raises as a TypeError: also a LogicError and an InvalidArgument."""
    return invalid(routine, detail, builtins.TypeError)


def bad_input(routine: str, exc: BaseException) -> Error:
    """A conversion error from a binding or the compiled path, as a LogicError of the same built-in kind."""
    kind = type(exc) if type(exc) in (builtins.TypeError, builtins.ValueError, builtins.OverflowError,
                                        builtins.BufferError) else builtins.TypeError
    return invalid(routine, f"{type(exc).__name__}: {exc}", kind)


def unsupported(routine: str, why: str) -> Error:
    """A PyCUDA feature this surface does not provide (or CUDA removed): LogicError and ironaccel Unsupported."""
    cls = combo(LogicError, ia.Unsupported)
    return cls(f"{routine} failed: {why}", op=routine, detail=why)


NO_ARRAYS = "CUDA arrays, texture and surface references are not provided (texture references were removed in CUDA 12)"


def no_arrays(routine: str) -> Error:
    """What every call on CUDA arrays or texture/surface references raises here."""
    return unsupported(routine, NO_ARRAYS)
