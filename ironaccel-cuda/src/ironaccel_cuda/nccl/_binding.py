"""NCCL through NVIDIA's nccl4py binding (`nccl.bindings.nccl`), loaded on first use; results as typed errors.

The binding is Cython: a collective is one Python call that converts its integer arguments in C,
releases the GIL and calls NCCL, so it costs a few hundred nanoseconds on top of NCCL itself
(bench/bench_nccl.py's call-overhead row compares it with ironaccel's call and PyTorch's).

`binding()` imports nccl4py and loads libnccl.so.2 once (through cuda.pathfinder, which finds the
`nvidia-nccl-cu13` wheel's library); a missing binding or library is `NotAvailable` naming what to
install.  Before NCCL reads its settings, NVLink SHARP (multicast) is turned off unless the
environment already says otherwise: `NCCL_NVLS_ENABLE=0`.  On shared multi-GPU hosts a program
that uses multicast can take the GPUs out of service.

`nccl_error(op, code)` is the typed error of an NCCL result: ncclInvalidArgument -> InvalidArgument,
ncclInvalidUsage -> InvalidState, ncclTimeout -> CollectiveTimeout, an out-of-memory CUDA failure ->
OutOfMemory, anything else DriverError; `op` is the NCCL call ("ncclAllReduce"), `code_name` NCCL's
name for the result, `detail` NCCL's text for it and its last error message.
"""

from __future__ import annotations

import enum
import os
import threading
from types import ModuleType
from typing import Any

from ironaccel import DType

from .. import _driver
from ..errors import BACKEND, DriverError, InvalidArgument, InvalidState, NotAvailable, OutOfMemory, Unsupported

__all__ = [
    "CollectiveTimeout",
    "IN_PROGRESS",
    "REDUCE_OPS",
    "RESULT_NAMES",
    "ReduceOp",
    "SUCCESS",
    "binding",
    "call",
    "movement_type",
    "nccl_error",
    "reduce_args",
    "reduction_type",
    "version",
]

SUCCESS = 0
IN_PROGRESS = 7
SPLIT_NOCOLOR = -1

RESULT_NAMES = {
    0: "ncclSuccess",
    1: "ncclUnhandledCudaError",
    2: "ncclSystemError",
    3: "ncclInternalError",
    4: "ncclInvalidArgument",
    5: "ncclInvalidUsage",
    6: "ncclRemoteError",
    7: "ncclInProgress",
    8: "ncclTimeout",
}

_HINTS = {
    1: "a CUDA call inside NCCL failed (out of memory, or an earlier kernel fault)",
    2: "a system call inside NCCL failed (sockets, shared memory); NCCL_DEBUG=WARN says which",
    3: "NCCL's internal check failed",
    6: "a remote rank failed or left; abort this communicator",
}

INSTALL = "pip install 'ironaccel-cuda[nccl]' (nccl4py and nvidia-nccl-cu13)"

# ncclDataType_t of each ironaccel DType that NCCL reduces natively.
_NCCL_TYPES = {
    DType.INT8: 0,
    DType.UINT8: 1,
    DType.INT32: 2,
    DType.UINT32: 3,
    DType.INT64: 4,
    DType.UINT64: 5,
    DType.FLOAT16: 6,
    DType.FLOAT32: 7,
    DType.FLOAT64: 8,
    DType.BFLOAT16: 9,
}
# Complex numbers add componentwise: sum and average run on their float parts.
_COMPLEX_PARTS = {DType.COMPLEX64: 7, DType.COMPLEX128: 8}
_UINT8 = 1

# ncclRedOp_t of each reduction name.
REDUCE_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
_COMPONENTWISE = {"sum", "avg"}


class ReduceOp(str, enum.Enum):
    """NCCL's reductions (ncclRedOp_t); the plain strings "sum", "prod", ... are accepted too."""

    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    AVG = "avg"


class CollectiveTimeout(DriverError, TimeoutError):
    """NCCL made no progress within the communicator's timeout: a peer is missing or hung.

    The communicator involved has been aborted (`ncclCommAbort`) when this is raised.
    """


_lock = threading.Lock()
_nb: ModuleType | None = None
_failure: NotAvailable | None = None


def binding() -> ModuleType:
    """The `nccl.bindings.nccl` module with libnccl loaded; NotAvailable says what is missing."""
    if _nb is not None:
        return _nb
    return _load()


def _load() -> ModuleType:
    global _nb, _failure
    with _lock:
        if _nb is not None:
            return _nb
        if _failure is not None:
            raise _driver._copy(_failure)
        try:
            _nb = _open()
        except NotAvailable as exc:
            _failure = exc
            raise
        return _nb


def _open() -> ModuleType:
    from ironaccel.probing import import_binding

    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    nb = import_binding(BACKEND, "nccl.bindings.nccl", "nccl4py", fix=INSTALL)
    try:
        nb.get_version()
    except RuntimeError as exc:  # cuda.pathfinder's DynamicLibNotFoundError, nccl4py's NotSupportedError
        raise NotAvailable(
            BACKEND,
            f"the NCCL library libnccl.so.2 could not be loaded ({type(exc).__name__}: {exc})".strip(),
            fix="pip install nvidia-nccl-cu13 (or 'ironaccel-cuda[nccl]')",
            library="libnccl.so.2",
            searched=("site-packages nvidia/nccl/lib", "dlopen(libnccl.so.2)"),
        ) from exc
    return nb


def version() -> tuple[int, int, int]:
    """(major, minor, patch) of the loaded libnccl (ncclGetVersion)."""
    code = int(call("ncclGetVersion", binding().get_version))
    if code >= 10000:
        return code // 10000, code % 10000 // 100, code % 100
    return code // 1000, code % 1000 // 100, code % 100


def call(op: str, fn: Any, *args: Any) -> Any:
    """`fn(*args)` (a binding function), its exceptions turned into typed errors naming `op`."""
    try:
        return fn(*args)
    except Exception as exc:
        raise translate(op, exc) from None


def translate(op: str, exc: Exception, comm: Any = None) -> Exception:
    """The typed error for an exception the binding raised from NCCL call `op`."""
    from ironaccel.errors import IronAccelError

    if isinstance(exc, IronAccelError):
        return exc
    nb = _nb
    if nb is not None and isinstance(exc, nb.NCCLError):
        return nccl_error(op, int(exc.status), comm)
    if type(exc).__name__ == "FunctionNotFoundError":  # nccl4py: the loaded libnccl lacks the symbol
        return Unsupported(BACKEND, op, f"the loaded libnccl has no {op} ({exc}); install a newer nvidia-nccl-cu13")
    if isinstance(exc, (TypeError, ValueError, OverflowError)):
        return InvalidArgument(BACKEND, op, detail=f"{type(exc).__name__}: {exc}")
    return DriverError(BACKEND, op, detail=f"{type(exc).__name__}: {exc}")


def nccl_error(op: str, code: int, comm: Any = None, note: str | None = None) -> DriverError:
    """The typed error for NCCL result `code` returned by (or reported after) `op`."""
    name = RESULT_NAMES.get(code, f"ncclResult {code}")
    text, last = _strings(code, comm)
    parts = [p for p in (note, text, last, _HINTS.get(code)) if p]
    detail = "; ".join(dict.fromkeys(parts)) or None
    if code == 4:
        return InvalidArgument(BACKEND, op, code, name, detail)
    if code == 5:
        return InvalidState(BACKEND, op, code, name, detail)
    if code == 8:
        return CollectiveTimeout(BACKEND, op, code, name, detail)
    if code == 1 and last and "out of memory" in last.lower():
        return OutOfMemory(BACKEND, op, code, name, detail)
    return DriverError(BACKEND, op, code, name, detail)


def _strings(code: int, comm: Any) -> tuple[str | None, str | None]:
    nb = _nb
    if nb is None:
        return None, None
    text = last = None
    try:
        text = nb.get_error_string(code) or None
    except Exception:
        pass
    try:
        last = nb.get_last_error(comm if comm is not None else nb.Comm(0)) or None
    except Exception:
        pass
    return text, last


def reduction_type(dtype: DType, op_name: str, nccl_op: str) -> tuple[int, int]:
    """(ncclDataType_t, elements per ironaccel element) for reducing `dtype` with `op_name`."""
    code = _NCCL_TYPES.get(dtype)
    if code is not None:
        return code, 1
    part = _COMPLEX_PARTS.get(dtype)
    if part is not None and op_name in _COMPONENTWISE:
        return part, 2
    if part is not None:
        raise InvalidArgument(BACKEND, nccl_op, detail=f"{op_name} is not defined for {dtype.value}; "
                              f"complex numbers reduce with {sorted(_COMPONENTWISE)} only")
    supported = [d.value for d in _NCCL_TYPES] + [f"{d.value} (sum, avg)" for d in _COMPLEX_PARTS]
    raise InvalidArgument(BACKEND, nccl_op, detail=f"NCCL cannot reduce {dtype.value}; reducible dtypes: "
                          f"{', '.join(supported)}")


def movement_type(dtype: DType) -> tuple[int, int]:
    """(ncclDataType_t, elements per ironaccel element) for moving `dtype` unchanged (bytes if NCCL lacks it)."""
    code = _NCCL_TYPES.get(dtype)
    if code is not None:
        return code, 1
    return _UINT8, dtype.itemsize


MOVES = {d: movement_type(d) for d in DType}
"""movement_type of every DType, for the hot path."""


def reduce_args(dtype: DType, op: Any, nccl_op: str) -> tuple[int, int, int]:
    """(ncclDataType_t, elements per element, ncclRedOp_t) for reducing `dtype` with `op`; InvalidArgument if not."""
    try:  # keyed by op, then the DType's value: str hashes are cached, an Enum's __hash__ is Python code
        return _REDUCTIONS[op][dtype._value_]
    except (KeyError, TypeError, AttributeError):
        pass
    name, code = reduce_op(op, nccl_op)
    dt, k = reduction_type(dtype, name, nccl_op)
    return dt, k, code


def reduce_op(op: Any, nccl_op: str) -> tuple[str, int]:
    """(name, ncclRedOp_t) of a reduction given as "sum" / ReduceOp.SUM / ..."""
    name = getattr(op, "value", op)
    code = REDUCE_OPS.get(name) if isinstance(name, str) else None
    if code is None:
        raise InvalidArgument(BACKEND, nccl_op, detail=f"op must be one of {sorted(REDUCE_OPS)}, got {op!r}")
    return name, code


def _reductions() -> dict[Any, dict[str, tuple[int, int, int]]]:
    table: dict[Any, dict[str, tuple[int, int, int]]] = {}
    for name, code in REDUCE_OPS.items():
        by_dtype = {}
        for dtype in DType:
            try:
                dt, k = reduction_type(dtype, name, "")
            except InvalidArgument:
                continue
            by_dtype[dtype.value] = (dt, k, code)
        table[name] = table[ReduceOp(name)] = by_dtype
    return table


_REDUCTIONS = _reductions()
