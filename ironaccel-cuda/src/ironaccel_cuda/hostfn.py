"""Host functions: a Python callable the driver runs in stream order (cuLaunchHostFunc, graph host nodes).

An eager launch goes through the compiled core: its C trampoline takes the GIL
on the driver's thread, runs the `HostFunc`, and drops the reference the launch
held.  A host function that can run more than once (a graph's host node,
captured or added explicitly) goes through a ctypes trampoline with a token
instead: the token names a `HostFunc` that lives as long as a Graph or
GraphExec that holds it, so a node that runs after its graph was dropped
finds nothing and does nothing.  Those driver entry points are called through
their own addresses (`cuGetProcAddress`), so the token reaches the trampoline
unchanged whatever the binding does with host functions.

An exception inside a host function is never lost: it goes to
`sys.unraisablehook` when it happens, and the next `synchronize()` or
`query()` of the stream it ran on raises `HostFuncError` (one per failure;
the original exception is its `__cause__`).  Streams that never ran a host
function keep their plain hot methods.

Host functions must not call CUDA (the driver may fail them with
CUDA_ERROR_NOT_PERMITTED, or deadlock), nor wait for other work of the GPU.
"""

from __future__ import annotations

import ctypes
import itertools
import sys
import threading
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Any

from . import _core
from ._driver import call, driver
from .errors import HostFuncError, Unsupported, closed, driver_error, invalid

__all__ = ["HostFunc", "launch", "launch_c", "launch_kept", "graph_add_node", "pending_errors", "raise_pending"]

_lock = threading.Lock()
_tokens = itertools.count(1)
_once: dict[int, HostFunc] = {}  # eager launches, kept until they ran
_kept: weakref.WeakValueDictionary[int, HostFunc] = weakref.WeakValueDictionary()  # graph nodes
_pending: weakref.WeakKeyDictionary[Any, list[HostFuncError]] = weakref.WeakKeyDictionary()
_by_capture: dict[int, list[HostFunc]] = {}  # capture id -> host functions queued while it ran


class HostFunc:
    """One callable and where its failures are reported (`sink`: a weak reference to a Stream, or None)."""

    __slots__ = ("fn", "token", "sink", "__weakref__")

    def __init__(self, fn: Callable[[], Any], sink: Any):
        self.fn = fn
        self.token = next(_tokens)
        self.sink = None if sink is None else weakref.ref(sink)

    def __repr__(self) -> str:
        return f"<HostFunc {getattr(self.fn, '__qualname__', self.fn)!r}>"

    def _run(self) -> None:
        """Call the function; a failure is kept for its stream and sent to sys.unraisablehook."""
        try:
            self.fn()
        except BaseException as exc:
            stream = self.sink() if self.sink is not None else None
            if stream is not None:
                error = HostFuncError(f"the host function {self.fn!r} raised {type(exc).__name__}: {exc}")
                error.__cause__ = exc
                with _lock:
                    _pending.setdefault(stream, []).append(error)
            sys.unraisablehook(_Unraisable(exc, self))


class _Unraisable:
    """What sys.unraisablehook expects (exc_type, exc_value, exc_traceback, err_msg, object)."""

    exc_type: type[BaseException]
    exc_value: BaseException | None
    exc_traceback: TracebackType | None
    err_msg: str | None
    object: object

    def __init__(self, exc: BaseException, entry: HostFunc):
        self.exc_type = type(exc)
        self.exc_value = exc
        self.exc_traceback = exc.__traceback__
        self.err_msg = "Exception ignored in a host function"
        self.object = entry


def _run(token: int) -> None:
    with _lock:
        entry = _once.pop(token, None) or _kept.get(token)
    if entry is not None:
        entry._run()


_HOSTFN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_trampoline = _HOSTFN(_run)
_TRAMPOLINE_ADDRESS: int = ctypes.cast(_trampoline, ctypes.c_void_p).value  # type: ignore[assignment]
_entry_points: dict[str, Any] = {}


def _entry(name: str, *argtypes: Any) -> Any:
    fn = _entry_points.get(name)
    if fn is None:
        drv = driver()
        flags = drv.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT
        out = call("cuGetProcAddress", name.encode(), 12000, flags)
        address = int(out[0] if isinstance(out, tuple) else out)
        if not address:
            raise Unsupported("cuda", name, f"the driver does not provide {name}")
        fn = ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(address)
        _entry_points[name] = fn
    return fn


def _check_callable(fn: Any, op: str) -> None:
    if not callable(fn):
        raise invalid(op, f"a host function must be callable (taking no arguments), got {type(fn).__name__}")


def launch(stream: Any, fn: Callable[[], Any]) -> HostFunc:
    """Queue `fn()` on `stream` (cuLaunchHostFunc); a capture keeps it for the graph it makes."""
    op = "cuLaunchHostFunc"
    _check_callable(fn, op)
    entry = HostFunc(fn, stream)
    if _core.launch_host_func(stream._h, entry):  # not capturing: the compiled trampoline, run once
        watch(stream)
        return entry
    capture = _capture_id(stream)
    with _lock:
        if capture is None:
            _once[entry.token] = entry
        else:
            _kept[entry.token] = entry
            _by_capture.setdefault(capture, []).append(entry)
    cu_launch = _entry(op, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    err = cu_launch(int(stream._h), _TRAMPOLINE_ADDRESS, entry.token)
    if err:
        with _lock:
            _once.pop(entry.token, None)
            if capture is not None:
                _by_capture.get(capture, []).remove(entry)
        raise driver_error(err, op)
    watch(stream)
    return entry


def launch_c(stream: Any, fn_address: int, user_data: int) -> None:
    """Queue a C host function (`void fn(void *)` at `fn_address`) with `user_data` on `stream` (cuLaunchHostFunc).

    Nothing is kept alive here: the caller holds the function and its data as
    long as the stream (or the graph a capture makes) can run it.
    """
    op = "cuLaunchHostFunc"
    if isinstance(fn_address, bool) or not isinstance(fn_address, int) or not 0 < fn_address < 1 << 64:
        raise invalid(op, f"expected the address of a C function, got {fn_address!r}")
    if isinstance(user_data, bool) or not isinstance(user_data, int) or not 0 <= user_data < 1 << 64:
        raise invalid(op, f"user_data must be an address (a non-negative 64-bit int), got {user_data!r}")
    if getattr(stream, "_h", _core.CLOSED) is _core.CLOSED:
        raise closed(op, "stream")
    cu_launch = _entry(op, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    err = cu_launch(int(stream._h), fn_address, user_data or None)
    if err:
        raise driver_error(err, op)
    _core.note_host_func()


def launch_kept(stream: Any, fn: Callable[[], Any]) -> HostFunc:
    """Queue `fn()` on `stream` through a token (cuLaunchHostFunc): it runs only while the caller holds the HostFunc
    returned.  For builders that keep a capture's host functions with its graph themselves."""
    _, entry = host_node_params(fn, stream, "cuLaunchHostFunc")
    launch_c(stream, _TRAMPOLINE_ADDRESS, entry.token)
    watch(stream)
    return entry


def _capture_id(stream: Any) -> int | None:
    """The id of the capture running on `stream`, or None when it is not capturing."""
    drv = driver()
    out = call("cuStreamGetCaptureInfo", stream._h)
    if int(out[0]) != int(drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE):
        return None
    return int(out[1])


def take_captured(stream: Any) -> list[HostFunc]:
    """The host functions queued during the capture running on `stream` (call before cuStreamEndCapture)."""
    capture = _capture_id(stream)
    if capture is None:
        return []
    with _lock:
        return _by_capture.pop(capture, [])


def graph_add_node(graph_h: int, deps: list[int], fn: Callable[[], Any], sink: Any) -> tuple[int, HostFunc]:
    """Add a host node running `fn()` to a graph (cuGraphAddHostNode); returns (node handle, HostFunc)."""
    op = "cuGraphAddHostNode"
    params, entry = host_node_params(fn, sink, op)
    node = ctypes.c_void_p()
    array = (ctypes.c_void_p * max(len(deps), 1))(*deps)
    add = _entry(op, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                 ctypes.c_void_p)
    err = add(ctypes.byref(node), graph_h, array if deps else None, len(deps), ctypes.addressof(params))
    if err:
        raise driver_error(err, op)
    return int(node.value or 0), entry


def host_node_params(fn: Callable[[], Any], sink: Any, op: str) -> tuple[Any, HostFunc]:
    """A CUDA_HOST_NODE_PARAMS (as two pointers, ctypes) for `fn`, and the HostFunc the caller must keep."""
    _check_callable(fn, op)
    entry = HostFunc(fn, sink)
    with _lock:
        _kept[entry.token] = entry
    return (ctypes.c_void_p * 2)(_TRAMPOLINE_ADDRESS, entry.token), entry


def exec_set_host_node(exec_h: int, node_h: int, fn: Callable[[], Any], sink: Any) -> HostFunc:
    op = "cuGraphExecHostNodeSetParams"
    params, entry = host_node_params(fn, sink, op)
    set_params = _entry(op, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    err = set_params(exec_h, node_h, ctypes.addressof(params))
    if err:
        raise driver_error(err, op)
    return entry


def retarget(entries: Any, stream: Any) -> None:
    """Report failures of these graph host functions to `stream` (the one that launched their graph)."""
    ref = weakref.ref(stream)
    for entry in entries:
        entry.sink = ref
    watch(stream)


def watch(stream: Any) -> None:
    """From now on, `stream.synchronize()` / `query()` raise host-function failures (`Stream._watch`)."""
    stream._watch()


def pending_errors(stream: Any) -> list[HostFuncError]:
    with _lock:
        return _pending.pop(stream, [])


def raise_pending(stream: Any) -> None:
    if stream in _pending:
        errors = pending_errors(stream)
        if errors:
            first = errors[0]
            if len(errors) > 1:
                first.others = errors[1:]
            raise first
