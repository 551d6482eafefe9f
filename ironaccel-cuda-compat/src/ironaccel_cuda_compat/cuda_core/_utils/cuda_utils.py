"""cuda.core's `_utils.cuda_utils`: its error types and the helpers code written for cuda.core imports.

`CUDAError` is also an ironaccel `DriverError` (so `except RuntimeError` and ironaccel's
own handlers catch it); its text is cuda.core's ("CUDA_ERROR_INVALID_VALUE: invalid
argument").  Errors raised inside ironaccel_cuda's own hot methods (a failing
`Stream.sync`, say) stay ironaccel's `DriverError`s: catch `DriverError` or
`RuntimeError` to handle both.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any

from cuda.bindings import driver, nvrtc

from ironaccel_cuda.errors import code_string, driver_code_name

from .. import _ia

__all__ = [
    "CUDAError",
    "ComputeCapability",
    "NVRTCError",
    "call",
    "cast_to_3_tuple",
    "check_or_create_options",
    "driver",
    "handle_return",
    "is_nested_sequence",
    "is_sequence",
    "nvrtc",
    "precondition",
]


class CUDAError(_ia.DriverError):
    """A CUDA driver, runtime or NVRTC call failed; `str()` is cuda.core's message."""

    def __init__(self, message: str = "", *, op: str | None = None, code: int | None = None,
                 code_name: str | None = None):
        super().__init__("cuda", op or "cuda.core", code, code_name, message or None)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message,))


class NVRTCError(CUDAError):
    """An NVRTC call failed (a compile error carries the compilation log)."""


ComputeCapability = namedtuple("ComputeCapability", ("major", "minor"))

_JOINT: dict[type, type] = {}


def binding_error(base: type, status: int, op: str, detail: str = "") -> CUDAError:
    """The error cuda.core raises for a failed nvJitLink / NVVM step, `base(status)` (cuda.bindings'
    nvJitLinkError or nvvmError), as an instance of a subclass of both `base` and CUDAError naming `op`: code
    that catches either (or RuntimeError) catches it.  `status` and `args` are the binding's."""
    cls = _JOINT.get(base)
    if cls is None:
        cls = _JOINT[base] = type(base.__name__, (CUDAError, base), {
            "__module__": __name__, "__reduce__": lambda self: (base, (self.status,))})
    text = str(base(status))  # the binding's "ERROR_... (n)"
    if detail:
        text = f"{text}\n{detail}"
    exc = cls(f"{op}: {text}", op=op, code=status)
    exc.status = status
    exc.args = (text,)
    return exc  # type: ignore[no-any-return]


def _driver_message(code: int) -> str:
    name = _code_name(code)
    text = code_string(code)
    if text:
        return f"{name}: {text}"
    return name


def _code_name(code: int) -> str:
    name = driver_code_name(code)
    if name is not None:
        return name
    return f"UNEXPECTED ERROR CODE: {code}"


def from_ironaccel(exc: _ia.DriverError) -> CUDAError:
    """The CUDAError for an ironaccel DriverError (cold path)."""
    if isinstance(exc, CUDAError):
        return exc
    if exc.code is not None:
        message = _driver_message(int(exc.code))
        if exc.detail and exc.detail not in message:
            message = f"{message} ({exc.op}: {exc.detail})"
    else:
        message = f"{exc.op}: {exc.detail or exc.message}"
    return CUDAError(message, op=exc.op, code=exc.code, code_name=exc.code_name)


def call(op: str, *args: Any) -> Any:
    """A cold driver call through ironaccel (`_driver.call`), failing with CUDAError."""
    try:
        return _ia.call(op, *args)
    except _ia.DriverError as exc:
        raise from_ironaccel(exc) from None


def guarded(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, a public ironaccel_cuda call, failing with CUDAError as `call` does."""
    try:
        return fn(*args)
    except _ia.DriverError as exc:
        raise from_ironaccel(exc) from None


def pointer_attribute(ptr: int, name: str) -> int | None:
    """The driver's attribute `name` of address `ptr` (ironaccel_cuda.pointer_attribute), None where the driver
    fails to say (an address it does not know, or an attribute it has none of for this memory)."""
    from ironaccel_cuda.memory import pointer_attribute as query

    try:
        return query(ptr, name)
    except _ia.DriverError as exc:
        if exc.code is None:
            raise
        return None


def _raise(error: Any, handle: Any = None) -> None:
    if isinstance(error, driver.CUresult):
        raise CUDAError(_driver_message(int(error)), code=int(error), code_name=_code_name(int(error)))
    if isinstance(error, nvrtc.nvrtcResult):
        err, text = nvrtc.nvrtcGetErrorString(error)
        message = f"{error}: {text.decode() if isinstance(text, bytes) else text}"
        if handle is not None:
            _, size = nvrtc.nvrtcGetProgramLogSize(handle)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(handle, log)
            message += f", compilation log:\n\n{log.decode('utf-8', errors='backslashreplace')}"
        raise NVRTCError(message, code=int(error))
    from cuda.bindings import runtime

    if isinstance(error, runtime.cudaError_t):
        err, text = runtime.cudaGetErrorString(error)
        raise CUDAError(f"{error.name}: {text.decode() if isinstance(text, bytes) else text}", code=int(error))
    raise RuntimeError(f"Unknown error type: {error}")


def handle_return(result: tuple[Any, ...], handle: Any = None) -> Any:
    """Check a cuda.bindings result tuple; return its outputs (None, one value or a tuple)."""
    if result[0]:
        _raise(result[0], handle)
    n = len(result)
    if n == 1:
        return None
    if n == 2:
        return result[1]
    return result[1:]


def check_or_create_options(cls: type, options: Any, options_description: str = "", keep_none: bool = False) -> Any:
    """`options` as an instance of `cls`: made from None (unless `keep_none`) or a dict; TypeError otherwise."""
    if options is None:
        return None if keep_none else cls()
    if isinstance(options, cls):
        return options
    if isinstance(options, dict):
        return cls(**options)
    raise TypeError(f"The {options_description} must be provided as an object of type {cls.__name__} or as a dict "
                    f"with valid {options_description}. The provided object is '{options}'.")


def cast_to_3_tuple(label: str, cfg: int | tuple[int, ...]) -> tuple[int, int, int]:
    """An int or a tuple of up to 3 positive ints, as a 3-tuple padded with 1."""
    original = cfg
    common = "must be an int, or a tuple with up to 3 ints"
    if isinstance(cfg, int) and not isinstance(cfg, bool):
        cfg = (cfg,)
    elif not isinstance(cfg, tuple):
        raise ValueError(f"{label} {common} (got {type(cfg)})")
    elif len(cfg) > 3:
        raise ValueError(f"{label} {common} (got tuple with length {len(cfg)})")
    elif any(isinstance(v, bool) or not isinstance(v, int) for v in cfg):
        raise ValueError(f"{label} {common} (got {cfg})")
    if any(v < 1 for v in cfg):
        raise ValueError(f"{label} value must be >= 1 (got {original})")
    return (*cfg, 1, 1)[:3]  # type: ignore[return-value]


def is_sequence(obj: object) -> bool:
    return isinstance(obj, Sequence)


def is_nested_sequence(obj: object) -> bool:
    return is_sequence(obj) and any(is_sequence(item) for item in obj)  # type: ignore[attr-defined]


def precondition(checker: Callable[..., None], what: str = "") -> Callable[..., Any]:
    """Decorate a method so that `checker(self, *args, what=...)` runs before it."""
    import functools

    def outer(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def inner(self: Any, *args: Any, **kwargs: Any) -> Any:
            checker(self, *args, what=what or fn.__name__)
            return fn(self, *args, **kwargs)

        return inner

    return outer


def _handle_boolean_option(option: Any) -> str:
    return "true" if bool(option) else "false"
