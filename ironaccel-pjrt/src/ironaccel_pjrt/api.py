"""One loaded PJRT plugin: its `PJRT_Api` table, version, attributes and error handling.

`load_api(path)` dlopens a plugin once per process (plugins are hundreds of MB
and `PJRT_Plugin_Initialize` is one-time setup), calls `GetPjrtApi`, and reads
the API version and `struct_size` of the table.  `PluginApi.call(name, args)`
runs one C function: it refuses a slot that the plugin's table does not reach
(`Unsupported`, never a read past the table) and turns a returned
`PJRT_Error*` into a typed ironaccel error naming the call, the PJRT code and
the plugin's message -- destroying the `PJRT_Error` on the way.
"""

from __future__ import annotations

import ctypes
import math
import os
import threading
import time
from collections.abc import Mapping
from ctypes import c_void_p
from typing import Any

from ironaccel.errors import (
    CompileError,
    DriverError,
    InvalidArgument,
    InvalidState,
    NotAvailable,
    OutOfMemory,
    Unsupported,
)

from . import capi

__all__ = ["BACKEND", "PluginApi", "load_api", "driver_error"]

BACKEND = "pjrt"

_ERROR_TYPES: Mapping[int, type[DriverError]] = {
    3: InvalidArgument,  # INVALID_ARGUMENT
    8: OutOfMemory,  # RESOURCE_EXHAUSTED
    9: InvalidState,  # FAILED_PRECONDITION
    11: InvalidArgument,  # OUT_OF_RANGE
}

#: Calls whose failure is a compiler diagnostic: they raise CompileError with the log.
_COMPILE_OPS = frozenset({"PJRT_Client_Compile", "PJRT_Compile"})


def driver_error(op: str, code: int | None, message: str) -> DriverError:
    """The typed error for a PJRT failure of `op` with `code` and the plugin's `message`."""
    name = capi.ERROR_CODES.get(code, "UNKNOWN") if code is not None else None
    if op in _COMPILE_OPS:
        return CompileError(BACKEND, op, message, code, name)
    cls = _ERROR_TYPES.get(code, DriverError) if code is not None else DriverError
    return cls(BACKEND, op, code, name, message)


def _string(pointer: int | None, size: int) -> str:
    if not pointer or not size:
        return ""
    return ctypes.string_at(pointer, size).decode("utf-8", "replace")


class PluginApi:
    """The function table of one plugin, with typed, leak-free calls.

    Attributes: `path`, `version` (major, minor), `table_size` (the plugin's
    `PJRT_Api.struct_size`).  Build through `load_api`.
    """

    def __init__(self, path: str):
        self.path = path
        try:
            self._lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as exc:
            raise NotAvailable(BACKEND, f"PJRT plugin {path} failed to load: {exc}", library=path,
                               searched=[path]) from exc
        try:
            get_api = self._lib.GetPjrtApi
        except AttributeError:
            raise NotAvailable(BACKEND, f"{path} does not export GetPjrtApi; it is not a PJRT plugin",
                               library=path, searched=[path]) from None
        get_api.restype = c_void_p
        get_api.argtypes = []
        base = get_api()
        if not base:
            raise NotAvailable(BACKEND, f"GetPjrtApi of {path} returned NULL", library=path)
        self._base: int = base
        self.table_size = ctypes.c_size_t.from_address(base).value
        version = capi.Version.from_address(base + 2 * ctypes.sizeof(c_void_p))
        self.version: tuple[int, int] = (version.major_version, version.minor_version)
        self._functions: dict[str, Any] = {}
        self._initialized = False
        self._lock = threading.Lock()
        for required in ("PJRT_Error_Destroy", "PJRT_Error_Message", "PJRT_Error_GetCode"):
            if not self.has(required):
                raise NotAvailable(BACKEND, f"{path} (PJRT API {self.version_string}) lacks {required}",
                                   library=path)
        self._error_destroy = self.function("PJRT_Error_Destroy")
        self._error_message = self.function("PJRT_Error_Message")
        self._error_code = self.function("PJRT_Error_GetCode")
        self._scratch = threading.local()
        for required in ("PJRT_Event_Await", "PJRT_Event_Destroy"):
            if not self.has(required):
                raise NotAvailable(BACKEND, f"{path} (PJRT API {self.version_string}) lacks {required}",
                                   library=path)
        self._event_await = self.function("PJRT_Event_Await")
        self._event_destroy = self.function("PJRT_Event_Destroy")

    @property
    def version_string(self) -> str:
        """The plugin's PJRT C API version as 'major.minor'."""
        return f"{self.version[0]}.{self.version[1]}"

    # -- the table ---------------------------------------------------------

    def _slot(self, name: str) -> int:
        offset = capi.SLOT_OFFSET.get(name)
        if offset is None or offset + ctypes.sizeof(c_void_p) > self.table_size:
            return 0
        return c_void_p.from_address(self._base + offset).value or 0

    def has(self, name: str) -> bool:
        """True when the plugin's table reaches `name` and the slot is set."""
        return bool(self._slot(name))

    def function(self, name: str) -> Any:
        """The C function `name`; Unsupported when this plugin's API version lacks it."""
        fn = self._functions.get(name)
        if fn is None:
            address = self._slot(name)
            if not address:
                raise Unsupported(BACKEND, name, f"the plugin {os.path.basename(self.path)} (PJRT API "
                                  f"{self.version_string}) does not provide {name}")
            # Tried: ctypes.PYFUNCTYPE (GIL kept) for the calls that never wait (event IsReady/Destroy,
            # ReadyEvent, UnsafePointer): to_host a little faster, the CPU round trip unchanged: not kept
            # (ironaccel-pjrt/bench/README.md).
            fn = self._functions[name] = capi.FUNCTION(address)
        return fn

    def call(self, name: str, args: ctypes.Structure) -> None:
        """Run `name(&args)`; a returned PJRT_Error becomes a typed exception (and is destroyed)."""
        fn = self._functions.get(name) or self.function(name)
        error = fn(ctypes.addressof(args))
        if error:
            raise self.take_error(name, error)

    def args(self, name: str, **fields: Any) -> Any:
        """A zeroed args struct (of `name`, or of the function `name`) with struct_size and `fields` set."""
        cls = _STRUCT_OF.get(name) or _struct_of(name)
        args = cls()
        args.struct_size = cls.STRUCT_SIZE
        for field_name, value in fields.items():
            setattr(args, field_name, value)
        return args

    def scratch(self, name: str) -> Any:
        """This thread's reusable args struct for `name` (hot paths): set every input field before each call.

        Never for a call that a finalizer (`__del__`) can make: the garbage collector may run one between
        filling the struct and the call, on this same thread.
        """
        cache = self._scratch.__dict__
        args = cache.get(name)
        if args is None:
            args = cache[name] = self.args(name)
        return args

    def scratch_dims(self, ndim: int) -> Any:
        """This thread's reusable int64 array of at least `ndim` dims (a new one past 32)."""
        if ndim > 32:
            return (ctypes.c_int64 * ndim)()
        dims = getattr(self._scratch, "dims", None)
        if dims is None:
            dims = self._scratch.dims = (ctypes.c_int64 * 32)()
        return dims

    # -- errors and events -----------------------------------------------------

    def take_error(self, op: str, error: int) -> DriverError:
        """Read code and message of a PJRT_Error, destroy it, return the typed exception."""
        try:
            code_args = self.args("PJRT_Error_GetCode_Args", error=error)
            failed = self._error_code(ctypes.addressof(code_args))
            code = None if failed else code_args.code
            message_args = self.args("PJRT_Error_Message_Args", error=error)
            self._error_message(ctypes.addressof(message_args))
            message = _string(message_args.message, message_args.message_size)
        finally:
            destroy_args = self.args("PJRT_Error_Destroy_Args", error=error)  # alive across the call
            self._error_destroy(ctypes.addressof(destroy_args))
        return driver_error(op, code, message)

    def destroy_event(self, event: int | None) -> None:
        """PJRT_Event_Destroy; a failure to destroy is reported, never leaked."""
        if event:
            args = self.scratch("PJRT_Event_Destroy")
            args.event = event
            error = self._event_destroy(ctypes.addressof(args))
            if error:
                raise self.take_error("PJRT_Event_Destroy", error)

    def await_event(self, op: str, event: int | None, spin: float = 0.0) -> None:
        """Block on `event` (GIL released), destroy it, raise its error as a failure of `op`.

        With `spin` > 0, PJRT_Event_IsReady is polled for up to `spin` seconds first, and the blocking
        PJRT_Event_Await comes after (at once, on a ready event, for its error).  See `Client.spin`.
        """
        if not event:
            return
        try:
            structs = self._scratch.events
        except AttributeError:
            structs = self._scratch.events = self._event_structs()
        await_args, await_address, destroy_args, destroy_address = structs
        try:
            if spin > 0.0:
                self._spin(op, event, spin)
            await_args.event = event
            error = self._event_await(await_address)
            if error:
                raise self.take_error(op, error)
        finally:
            destroy_args.event = event
            error = self._event_destroy(destroy_address)
            if error:
                raise self.take_error("PJRT_Event_Destroy", error)

    def _event_structs(self) -> tuple[Any, int, Any, int]:
        """This thread's PJRT_Event_Await and PJRT_Event_Destroy args for `await_event`, with their addresses."""
        awaiting, destroying = self.args("PJRT_Event_Await"), self.args("PJRT_Event_Destroy")
        return awaiting, ctypes.addressof(awaiting), destroying, ctypes.addressof(destroying)

    def _spin(self, op: str, event: int, seconds: float) -> None:
        """Poll `event` until it is ready or `seconds` have passed (the caller awaits it after)."""
        is_ready = self._functions.get("PJRT_Event_IsReady") or self.function("PJRT_Event_IsReady")
        args = self.scratch("PJRT_Event_IsReady")
        args.event = event
        args.is_ready = False
        address = ctypes.addressof(args)
        clock = time.perf_counter
        deadline = clock() + seconds
        while True:
            error = is_ready(address)
            if error:
                raise self.take_error(op, error)
            if args.is_ready or clock() >= deadline:
                return

    # -- plugin-level calls --------------------------------------------------------

    def initialize(self) -> None:
        """PJRT_Plugin_Initialize, once per process and plugin."""
        with self._lock:
            if self._initialized:
                return
            if self.has("PJRT_Plugin_Initialize"):
                self.call("PJRT_Plugin_Initialize", self.args("PJRT_Plugin_Initialize_Args"))
            self._initialized = True

    def attributes(self) -> dict[str, Any]:
        """PJRT_Plugin_Attributes as a dict ({} when the plugin lacks the call)."""
        if not self.has("PJRT_Plugin_Attributes"):
            return {}
        args = self.args("PJRT_Plugin_Attributes_Args")
        self.call("PJRT_Plugin_Attributes", args)
        return named_values(args.attributes, args.num_attributes)


_STRUCT_OF: dict[str, type[capi.PjrtStruct]] = {}


def _struct_of(name: str) -> type[capi.PjrtStruct]:
    cls = capi.STRUCTS.get(name) or capi.STRUCTS[name + "_Args"]
    _STRUCT_OF[name] = cls
    return cls


def named_values(pointer: int | None, count: int) -> dict[str, Any]:
    """Decode an array of PJRT_NamedValue into a dict."""
    if not pointer or not count:
        return {}
    values: dict[str, Any] = {}
    stride = ctypes.sizeof(capi.NamedValue)
    for i in range(count):
        nv = capi.NamedValue.from_address(pointer + i * stride)
        name = _string(nv.name, nv.name_size)
        kind = nv.type
        value: Any
        if kind == capi.NAMED_STRING:
            value = _string(nv.string_value, nv.value_size)
        elif kind == capi.NAMED_INT64:
            value = nv.int64_value
        elif kind == capi.NAMED_INT64_LIST:
            value = [nv.int64_array_value[j] for j in range(nv.value_size)] if nv.value_size else []
        elif kind == capi.NAMED_FLOAT:
            value = nv.float_value
        elif kind == capi.NAMED_BOOL:
            value = bool(nv.bool_value)
        else:
            value = f"<unknown PJRT_NamedValue type {kind}>"
        values[name] = value
    return values


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
FLOAT32_MAX = 3.4028234663852886e38


def _int64(name: str, value: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidArgument(BACKEND, "PJRT_Client_Create", detail=(
            f"option {name}={value}: PJRT passes int64 values, and this one does not fit in 64 bits"))
    return value


class NamedValueArray:
    """Client-create options as a PJRT_NamedValue array that keeps its strings alive.

    Values are refused, never wrapped or rounded away, when they do not fit the
    C field: an int past int64, a float that is not finite or past float32.
    """

    def __init__(self, options: Mapping[str, Any]):
        self._keep: list[Any] = []
        self.count = len(options)
        self.array = (capi.NamedValue * max(self.count, 1))()
        for slot, (name, value) in zip(self.array, options.items()):
            if not isinstance(name, str) or not name or "\0" in name:
                raise InvalidArgument(BACKEND, "PJRT_Client_Create", detail=(
                    f"option names are non-empty str without NUL, got {name!r}"))
            encoded = name.encode()
            self._keep.append(encoded)
            slot.struct_size = capi.NamedValue.STRUCT_SIZE
            slot.name = ctypes.cast(ctypes.c_char_p(encoded), c_void_p).value
            slot.name_size = len(encoded)
            if isinstance(value, bool):
                slot.type, slot.bool_value, slot.value_size = capi.NAMED_BOOL, value, 1
            elif isinstance(value, int):
                slot.type, slot.int64_value, slot.value_size = capi.NAMED_INT64, _int64(name, value), 1
            elif isinstance(value, float):
                if not math.isfinite(value) or abs(value) > FLOAT32_MAX:
                    raise InvalidArgument(BACKEND, "PJRT_Client_Create", detail=(
                        f"option {name}={value!r}: PJRT passes a C float, which must be finite and within float32"))
                slot.type, slot.float_value, slot.value_size = capi.NAMED_FLOAT, value, 1
            elif isinstance(value, str):
                data = value.encode()
                self._keep.append(data)
                slot.type, slot.value_size = capi.NAMED_STRING, len(data)
                slot.string_value = ctypes.cast(ctypes.c_char_p(data), c_void_p).value
            elif isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool)
                                                          for v in value):
                ints = (ctypes.c_int64 * max(len(value), 1))(*(_int64(name, v) for v in value))
                self._keep.append(ints)
                slot.type, slot.value_size = capi.NAMED_INT64_LIST, len(value)
                slot.int64_array_value = ctypes.cast(ints, ctypes.POINTER(ctypes.c_int64))
            else:
                raise InvalidArgument(BACKEND, "PJRT_Client_Create", detail=(
                    f"option {name}={value!r}: values are str, int, float, bool or a list of ints"))

    @property
    def pointer(self) -> int:
        return ctypes.addressof(self.array) if self.count else 0


_loaded: dict[str, PluginApi] = {}
_load_lock = threading.Lock()


def load_api(path: str) -> PluginApi:
    """The PluginApi of the plugin at `path`, loaded once per process (keyed by real path)."""
    real = os.path.realpath(path)
    api = _loaded.get(real)
    if api is None:
        with _load_lock:
            api = _loaded.get(real)
            if api is None:
                api = _loaded[real] = PluginApi(real)
    return api
