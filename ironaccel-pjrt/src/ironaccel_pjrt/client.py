"""`Client`: one `PJRT_Client` of one plugin, with its addressable devices and memory spaces.

`Client.create(plugin)` runs `PJRT_Plugin_Initialize` (once per process) and
`PJRT_Client_Create` with the plugin's create options (`default_options`:
the CUDA/ROCm plugins get what JAX passes them, minus memory preallocation).
A client that cannot be created raises `NotAvailable` with the plugin's code
and message (the CUDA plugin on a machine without a GPU: "No visible GPU devices.").

The client owns every buffer and executable made through it: `close()`
destroys them first, then the client, and later use of any of them raises
`ClosedError`.  It also holds the compiled-executable cache, keyed on
(program, format, compile options).
"""

from __future__ import annotations

import atexit
import ctypes
import math
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from ctypes import c_void_p
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ironaccel.errors import ClosedError, DriverError, InvalidArgument, NotAvailable, OutOfMemory, Unsupported

from . import capi
from .api import BACKEND, NamedValueArray, PluginApi, _string, load_api, named_values
from .buffer import Buffer, destroy_dropped
from .cuda_libraries import preload_nvidia_libraries
from .discovery import PluginLocation
from .dtypes import to_pjrt
from .executable import Executable, normalise_program
from .options import CompileOptions
from .signature import main_signature

__all__ = ["Client", "DeviceInfo", "MemorySpace", "default_options", "check_options", "spin_seconds", "OPTION_TYPES",
           "ENV_OPTIONS", "ENV_SPIN"]

#: Extra client-create options, ``name=value`` pairs separated by ``;``, applied to every plugin, e.g.
#: ``IRONACCEL_PJRT_OPTIONS="preallocate=true"``.  A value is read as the type its option has in
#: `OPTION_TYPES` (a list as ``0,1``); for other options as int, float, true/false, else a string.
ENV_OPTIONS = "IRONACCEL_PJRT_OPTIONS"
CACHE_SIZE = 64
UPLOAD = "PJRT_Client_BufferFromHostBuffer"
#: Upload args structs kept per thread, one per (dtype, shape, device, memory); past this many, the
#: thread's set is dropped and refilled.
UPLOAD_SLOTS = 64

#: How long (microseconds) a wait for a buffer polls its event before blocking, e.g.
#: ``IRONACCEL_PJRT_SPIN_US=0`` to always block at once.  Default: `CPU_SPIN_US` on a CPU client with two
#: or more usable cores, 0 on any other.
ENV_SPIN = "IRONACCEL_PJRT_SPIN_US"
#: The XLA CPU client runs a computation of 1000 flops or more on its worker pool.  A worker that has
#: been idle for more than ~15 us sleeps, and a caller blocked in PJRT_Event_Await sleeps too: a small
#: program then takes two thread wake-ups, each far slower than the program, where polling saves the second
#: (bench_execute.py, round_trip; ironaccel-pjrt/bench/README.md).  200 us covers the slow case with room.
CPU_SPIN_US = 200.0


def spin_seconds(platform_name: str, api: PluginApi | None = None) -> float:
    """The poll-before-block time of a client of `platform_name`, in seconds (see `ENV_SPIN`)."""
    text = os.environ.get(ENV_SPIN, "").strip()
    if text:
        try:
            micros = float(text)
        except ValueError:
            micros = math.nan
        if not math.isfinite(micros) or micros < 0:
            raise InvalidArgument(BACKEND, "PJRT_Client_Create", detail=(
                f"{ENV_SPIN}={text!r}: give microseconds, a finite number >= 0"))
    elif platform_name.lower() == "cpu" and _usable_cores() >= 2:
        micros = CPU_SPIN_US
    else:
        micros = 0.0
    if micros and api is not None and not api.has("PJRT_Event_IsReady"):
        return 0.0
    return micros * 1e-6


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: Every open client, closed at interpreter exit before the plugins' own teardown (as JAX does).
_live: weakref.WeakSet[Client] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for client in list(_live):
        try:
            client.close()
        except Exception:
            pass


#: The client-create options PJRT plugins read, with the PJRT_NamedValue type each reads: XLA's CPU
#: plugin (pjrt_c_api_cpu_internal.cc) and GPU plugins (GetXlaPluginCAPIClientOptions,
#: pjrt_c_api_gpu_internal.cc).  Older plugins read them with std::get and abort the whole process
#: (std::bad_variant_access) on another type, so a known option of the wrong type is refused here,
#: before PJRT_Client_Create.  Options not listed are passed on as given (newer plugins refuse names
#: they do not know with INVALID_ARGUMENT).
OPTION_TYPES: dict[str, str] = {
    "cpu_device_count": "int64",
    "platform_name": "string",
    "allocator": "string",
    "memory_fraction": "float",
    "preallocate": "bool",
    "collective_memory_size": "int64",
    "visible_devices": "int64 list",
    "node_id": "int64",
    "num_nodes": "int64",
    "enable_mock_nccl": "bool",
    "mock_gpu_topology": "string",
    "should_stage_host_to_device_transfers": "bool",
}

_BOOL_WORDS = {"true": True, "false": False, "1": True, "0": False}


def _parse_value(name: str, text: str) -> Any:
    """An IRONACCEL_PJRT_OPTIONS value as the type its option is read as (guessed for unknown options)."""
    text = text.strip()
    kind = OPTION_TYPES.get(name)
    try:
        if kind == "string":
            return text
        if kind == "int64":
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "bool":
            return _BOOL_WORDS[text.lower()]
        if kind == "int64 list":
            return [int(part) for part in text.split(",") if part.strip()]
    except (ValueError, KeyError):
        raise InvalidArgument(BACKEND, "PJRT_Client_Create", detail=(
            f"{ENV_OPTIONS}: {name}={text!r}, but PJRT plugins read {name} as {_KIND_WORDS[kind]}")) from None
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for guess in (int, float):
        try:
            return guess(text)
        except ValueError:
            pass
    return text


_KIND_WORDS = {"string": "a string", "int64": "an int64", "float": "a float", "bool": "a bool",
               "int64 list": "a list of int64 (comma-separated)", None: "?"}


def check_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """`options` with each known option checked against the type plugins read it as (an int where a
    float is read becomes a float); InvalidArgument naming the option otherwise."""
    checked: dict[str, Any] = {}
    for name, value in options.items():
        kind = OPTION_TYPES.get(name)
        ok = True
        if kind == "string":
            ok = isinstance(value, str)
        elif kind == "int64":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind == "float":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            value = float(value) if ok else value
        elif kind == "bool":
            ok = isinstance(value, bool)
        elif kind == "int64 list":
            ok = isinstance(value, (list, tuple)) and all(
                isinstance(v, int) and not isinstance(v, bool) for v in value)
        if not ok:
            raise InvalidArgument(BACKEND, "PJRT_Client_Create", detail=(
                f"option {name}={value!r} is {type(value).__name__}, but PJRT plugins read {name} as "
                f"{_KIND_WORDS[kind]}"))
        checked[name] = value
    return checked


def default_options(plugin: PluginLocation) -> dict[str, Any]:
    """Client-create options for `plugin`, as JAX builds them for the same plugin.

    The GPU plugins validate option names, so only names they know are sent:
    ``platform_name`` and ``allocator`` (JAX's ``generate_pjrt_gpu_plugin_options``),
    plus ``preallocate=False`` so that a process holding several clients (or
    JAX beside ironaccel) does not reserve 75% of the GPU per client.
    JAX's own variables ``XLA_PYTHON_CLIENT_ALLOCATOR``, ``XLA_PYTHON_CLIENT_PREALLOCATE``
    and ``XLA_CLIENT_MEM_FRACTION`` are honoured, then ``IRONACCEL_PJRT_OPTIONS``.
    """
    options: dict[str, Any] = {}
    platform = plugin.platform_hint
    if platform in ("cuda", "rocm"):
        options["platform_name"] = platform
        options["allocator"] = os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR", "default").lower()
        preallocate = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE")
        options["preallocate"] = preallocate not in ("false", "False", "0") if preallocate else False
        fraction = os.environ.get("XLA_CLIENT_MEM_FRACTION") or os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION")
        if fraction:
            options["memory_fraction"] = float(fraction)
    for pair in os.environ.get(ENV_OPTIONS, "").split(";"):
        name, sep, value = pair.partition("=")
        if sep and name.strip():
            options[name.strip()] = _parse_value(name.strip(), value)
    return options


@dataclass(frozen=True)
class MemorySpace:
    """A PJRT_Memory: `kind` ("device", "pinned_host", "unpinned_host"...), `id`, description."""

    handle: int = field(repr=False, compare=False)
    id: int
    kind: str
    description: str


@dataclass(frozen=True, eq=False)
class DeviceInfo:
    """One addressable PJRT_Device and its description, read once at client creation."""

    client: Client = field(repr=False)
    handle: int = field(repr=False)
    index: int  # position among the client's addressable devices
    id: int  # the global device id, used in device assignments
    kind: str
    local_hardware_id: int
    process_index: int
    description: str
    debug_string: str
    attributes: Mapping[str, Any]
    memories: tuple[MemorySpace, ...]
    default_memory: MemorySpace | None

    def memory(self, kind: str) -> MemorySpace:
        """The memory space of `kind`; InvalidArgument listing the kinds there are."""
        for space in self.memories:
            if space.kind == kind:
                return space
        raise InvalidArgument(BACKEND, "PJRT_Device_AddressableMemories", detail=(
            f"device {self.id} has no memory of kind {kind!r}; it has {[m.kind for m in self.memories]}"))

    def memory_stats(self) -> dict[str, int]:
        """PJRT_Device_MemoryStats: bytes_in_use and the statistics the plugin sets."""
        op = "PJRT_Device_MemoryStats"
        api = self.client.api
        self.client._check_open(op)
        args = api.args(op, device=self.handle)
        api.call(op, args)
        stats = {"bytes_in_use": int(args.bytes_in_use)}
        for name in capi.MEMORY_STATS[1:]:
            if getattr(args, f"{name}_is_set"):
                stats[name] = int(getattr(args, name))
        return stats


class Client:
    """A PJRT client of one plugin: devices, uploads, compilation (cached), ownership of what it made."""

    def __init__(self, plugin: PluginLocation, api: PluginApi, handle: int, options: Mapping[str, Any]):
        self.plugin = plugin
        self.api = api
        self.options = dict(options)
        self._handle: int | None = handle
        self._lock = threading.RLock()
        #: The executables made through this client (closed with it).
        self._objects: weakref.WeakSet[Any] = weakref.WeakSet()
        #: The PJRT_Buffer handles of this client's live buffers.  A handle is destroyed by whoever takes it
        #: out of this set (`Buffer.delete` or `close`), so once and only once.  A plain set of ints: adding
        #: and discarding cost a fraction of what a WeakSet of the Buffer objects does (per buffer made and freed).
        self._buffers: set[int] = set()
        #: Handles of small buffers dropped without delete(), destroyed after the next launch (Buffer.__del__).
        self._dropped: list[int] = []
        self._cache: OrderedDict[tuple[Any, ...], Executable] = OrderedDict()
        #: Per thread: `slots`, the upload args structs by (dtype, shape, device, memory); see buffer_from_host.
        self._uploads = threading.local()
        #: Whether to_host asks for a row-major host layout explicitly (set below, once the platform is known).
        self.explicit_host_layout = True
        self.platform_name = self._string_query("PJRT_Client_PlatformName", "platform_name")
        self.platform_version = self._string_query("PJRT_Client_PlatformVersion", "platform_version")
        # CPU and GPU clients keep arrays dense row-major, so their own layout is the host's: skipping the
        # explicit layout saves a relayout pass per copy.  Others (TPU tiles its arrays) are asked for row-major
        # data.
        self.explicit_host_layout = self.platform_name.lower() not in ("cpu", "cuda", "rocm", "gpu")
        #: CPU buffers live in host memory, dense row-major: to_host copies them with one memmove from
        #: PJRT_Buffer_UnsafePointer instead of the plugin's asynchronous copy, which is many times slower.
        self.host_memcpy = self.platform_name.lower() == "cpu" and api.has("PJRT_Buffer_UnsafePointer")
        #: Seconds a wait for a buffer polls PJRT_Event_IsReady before it blocks in PJRT_Event_Await.
        self.spin = spin_seconds(self.platform_name, api)
        self._memory_kinds: dict[int, str] = {}
        self.devices: tuple[DeviceInfo, ...] = self._read_devices()

    @classmethod
    def create(cls, plugin: PluginLocation, options: Mapping[str, Any] | None = None) -> Client:
        """Initialize the plugin and create a client; NotAvailable (with the PJRT code) if it can't.

        `options` (default: `default_options(plugin)`) are checked first: InvalidArgument for a known
        option of the wrong type or a value that does not fit its C field.
        """
        if options is not None and not isinstance(options, Mapping):
            raise InvalidArgument(BACKEND, "PJRT_Client_Create", detail=(
                f"options must be a mapping of option names to values, got {type(options).__name__}"))
        opts = check_options(default_options(plugin) if options is None else options)
        if plugin.platform_hint == "cuda":
            preload_nvidia_libraries()  # as JAX does before it creates a CUDA client
        try:
            api = load_api(plugin.path)
            api.initialize()
        except DriverError as exc:
            raise NotAvailable(BACKEND, f"plugin {plugin.name} ({plugin.path}): {exc.op} failed: {exc.message}",
                               code=exc.code, code_name=exc.code_name, library=plugin.path) from exc
        values = NamedValueArray(opts)
        args = api.args("PJRT_Client_Create", create_options=values.pointer, num_options=values.count)
        try:
            api.call("PJRT_Client_Create", args)
        except DriverError as exc:
            raise NotAvailable(
                BACKEND,
                f"plugin {plugin.name} (PJRT API {api.version_string}) could not create a client: "
                f"{exc.code_name} ({exc.code}): {exc.detail}",
                code=exc.code, code_name=exc.code_name, library=plugin.path,
                fix="check the plugin's hardware and driver, or pick another plugin with IRONACCEL_PJRT_PLUGIN",
            ) from exc
        try:
            client = cls(plugin, api, args.client, opts)
        except BaseException:
            api.call("PJRT_Client_Destroy", api.args("PJRT_Client_Destroy", client=args.client))
            raise
        _live.add(client)
        return client

    # -- state -------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether the client was closed (its PJRT client destroyed)."""
        return self._handle is None

    def _check_open(self, op: str) -> int:
        handle = self._handle
        if handle is None:
            raise ClosedError(BACKEND, op, "client")
        return handle

    def _track(self, obj: Any) -> None:
        self._objects.add(obj)

    def _untrack(self, obj: Any) -> None:
        self._objects.discard(obj)

    def close(self) -> None:
        """Destroy every buffer and executable of this client, then the client; idempotent."""
        with self._lock:
            if self._handle is None:
                return
            self._cache.clear()
            for obj in list(self._objects):
                try:
                    obj.delete()
                except Exception:
                    obj._invalidate()
            buffers, dropped, api = self._buffers, self._dropped, self.api
            while buffers or dropped:  # a finalizer run in here may move a handle from one to the other
                destroy_dropped(self)
                while buffers:
                    try:
                        api.call("PJRT_Buffer_Destroy", api.args("PJRT_Buffer_Destroy", buffer=buffers.pop()))
                    except Exception:
                        pass
            handle = self._handle
            self._handle = None
            self.api.call("PJRT_Client_Destroy", self.api.args("PJRT_Client_Destroy", client=handle))

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self.devices)} devices"
        return f"<pjrt Client {self.plugin.name} {self.platform_name} API {self.api.version_string} {state}>"

    # -- queries -----------------------------------------------------------------

    def _string_query(self, op: str, field_name: str, **fields: Any) -> str:
        args = self.api.args(op, **fields) if fields else self.api.args(op, client=self._check_open(op))
        self.api.call(op, args)
        return _string(getattr(args, field_name), getattr(args, f"{field_name}_size"))

    def _optional(self, op: str, default: Any, fn: Any) -> Any:
        """Run `fn()` unless the plugin lacks `op` (Unsupported) or does not implement it."""
        if not self.api.has(op):
            return default
        try:
            return fn()
        except DriverError as exc:
            if exc.code_name == "UNIMPLEMENTED":
                return default
            raise

    def memory_kind(self, memory: int) -> str:
        """The kind string of a PJRT memory (e.g. 'device', 'pinned_host'), asked once and kept."""
        kind = self._memory_kinds.get(memory)
        if kind is None:
            kind = self._memory_kinds[memory] = self._string_query("PJRT_Memory_Kind", "kind", memory=memory)
        return kind

    def _memory_space(self, memory: int) -> MemorySpace:
        args = self.api.args("PJRT_Memory_Id", memory=memory)
        self.api.call("PJRT_Memory_Id", args)
        description = self._optional("PJRT_Memory_ToString", "", lambda: self._string_query(
            "PJRT_Memory_ToString", "to_string", memory=memory))
        return MemorySpace(memory, int(args.id), self.memory_kind(memory), description)

    def _read_devices(self) -> tuple[DeviceInfo, ...]:
        api = self.api
        op = "PJRT_Client_AddressableDevices"
        args = api.args(op, client=self._check_open(op))
        api.call(op, args)
        pointers = ctypes.cast(args.addressable_devices, ctypes.POINTER(c_void_p))
        devices = []
        for index in range(args.num_addressable_devices):
            device = pointers[index]
            get = api.args("PJRT_Device_GetDescription", device=device)
            api.call("PJRT_Device_GetDescription", get)
            desc = get.device_description
            ident = api.args("PJRT_DeviceDescription_Id", device_description=desc)
            api.call("PJRT_DeviceDescription_Id", ident)
            process = api.args("PJRT_DeviceDescription_ProcessIndex", device_description=desc)
            api.call("PJRT_DeviceDescription_ProcessIndex", process)
            kind = self._string_query("PJRT_DeviceDescription_Kind", "device_kind", device_description=desc)
            text = self._string_query("PJRT_DeviceDescription_ToString", "to_string", device_description=desc)
            debug = self._string_query("PJRT_DeviceDescription_DebugString", "debug_string",
                                       device_description=desc)
            attrs = api.args("PJRT_DeviceDescription_Attributes", device_description=desc)
            api.call("PJRT_DeviceDescription_Attributes", attrs)
            hardware = api.args("PJRT_Device_LocalHardwareId", device=device)
            api.call("PJRT_Device_LocalHardwareId", hardware)
            memories, default = self._device_memories(device)
            devices.append(DeviceInfo(
                client=self, handle=device, index=index, id=int(ident.id), kind=kind,
                local_hardware_id=int(hardware.local_hardware_id), process_index=int(process.process_index),
                description=text, debug_string=debug,
                attributes=named_values(attrs.attributes, attrs.num_attributes),
                memories=memories, default_memory=default,
            ))
        return tuple(devices)

    def _device_memories(self, device: int) -> tuple[tuple[MemorySpace, ...], MemorySpace | None]:
        api = self.api

        def read() -> tuple[MemorySpace, ...]:
            args = api.args("PJRT_Device_AddressableMemories", device=device)
            api.call("PJRT_Device_AddressableMemories", args)
            pointers = ctypes.cast(args.memories, ctypes.POINTER(c_void_p))
            return tuple(self._memory_space(pointers[i]) for i in range(args.num_memories))

        def default() -> MemorySpace:
            args = api.args("PJRT_Device_DefaultMemory", device=device)
            api.call("PJRT_Device_DefaultMemory", args)
            return self._memory_space(args.memory)

        return (self._optional("PJRT_Device_AddressableMemories", (), read),
                self._optional("PJRT_Device_DefaultMemory", None, default))

    def device_by_id(self, device_id: int) -> DeviceInfo:
        """The addressable device with PJRT id `device_id`; InvalidArgument naming the ids there are."""
        for device in self.devices:
            if device.id == device_id:
                return device
        raise InvalidArgument(BACKEND, "PJRT_Client_LookupDevice", detail=(
            f"no addressable device with id {device_id}; ids are {[d.id for d in self.devices]}"))

    def _own_device(self, device: DeviceInfo | int | None, op: str) -> DeviceInfo:
        if device is None:
            return self.devices[0]
        if isinstance(device, int) and not isinstance(device, bool):
            return self.device_by_id(device)
        if not isinstance(device, DeviceInfo) or device.client is not self:
            raise InvalidArgument(BACKEND, op, detail="the device belongs to another client")
        return device

    # -- buffers -----------------------------------------------------------------

    def buffer_from_host(self, array: Any, device: DeviceInfo | int | None = None, *,
                         memory: str | None = None) -> Buffer:
        """Copy a host array (any shape, any supported dtype) to `device` (default: the first device).

        `memory` picks a memory space by kind ("device", "pinned_host", ...).  A
        non-contiguous array is copied to a contiguous one first.
        """
        op = UPLOAD
        if self._handle is None:
            raise ClosedError(BACKEND, op, "client")
        target = self.devices[0] if device is None else self._own_device(device, op)
        if memory is not None and not isinstance(memory, str):
            raise InvalidArgument(BACKEND, op, detail=f"memory must be a memory kind (str) or None, got {memory!r}")
        try:
            if type(array) is not np.ndarray:
                array = np.asarray(array)
            flags = array.flags
            if not flags.c_contiguous:
                array = np.ascontiguousarray(array)  # keeps ndim (unlike for 0-d input, where it would add one)
                flags = array.flags
        except MemoryError as exc:
            raise OutOfMemory(BACKEND, op, detail=f"no host memory for the contiguous copy to upload: {exc}") from None
        except (TypeError, ValueError) as exc:  # a ragged list; an array past numpy's size limit
            raise InvalidArgument(BACKEND, op, detail=f"not an array numpy can hold: {exc}") from None
        # The args struct of this thread for (dtype, shape, device, memory), filled once: an upload sets
        # only the data pointer (cheaper than filling every field and the dims each time).
        key = (array.dtype, array.shape, target, memory)
        try:
            slot = self._uploads.slots[key]
        except (AttributeError, KeyError):
            slot = self._upload_slot(key)
        args, address, dtype, by_buffer, event_args, event_address = slot
        if by_buffer and flags.writeable:
            try:  # cheaper than array.ctypes.data (which builds a numpy _ctypes object per call)
                args.data = ctypes.addressof(ctypes.c_char.from_buffer(array))  # type: ignore[arg-type]
            except (TypeError, ValueError, BufferError):
                args.data = array.ctypes.data
        else:
            args.data = array.ctypes.data
        api = self.api
        # (Tried: the C function kept in the slot instead of this lookup: a gain within the noise;
        # ironaccel-pjrt/bench/README.md.)
        error = (api._functions.get(op) or api.function(op))(address)
        if error:
            raise api.take_error(op, error)
        buffer = args.buffer
        event = args.done_with_host_buffer
        if event:
            # kImmutableOnlyDuringCall: the plugin may not hold on to `data` once the call has returned, so
            # done_with_host_buffer has nothing left to say; it is destroyed unawaited
            # (an await would only add to each upload).
            # (kImmutableZeroCopy, tried: the C call is a little faster for float32[1024] on the
            # CPU plugin, and the array would have to live until the event; not worth its lifetime rules.)
            event_args.event = event
            error = api._event_destroy(event_address)
            if error:
                api.call("PJRT_Buffer_Destroy", api.args("PJRT_Buffer_Destroy", buffer=buffer))
                raise api.take_error("PJRT_Event_Destroy", error)
        return Buffer(self, buffer, target, key[1], dtype, key[0])

    def _upload_slot(self, key: tuple[Any, ...]) -> tuple[Any, int, Any, bool, Any, int]:
        """Build (and keep, for this thread) the upload args struct for `key` = (dtype, shape, device, memory)."""
        op = UPLOAD
        np_dtype, shape, target, memory = key
        dtype, pjrt_type = to_pjrt(np_dtype, op)
        memory_handle = None if memory is None else target.memory(memory).handle
        ndim = len(shape)
        args = self.api.args(op)
        args.client = self._check_open(op)
        args.type = pjrt_type
        args.dims = (ctypes.c_int64 * max(ndim, 1))(*shape)  # the struct keeps the array alive
        args.num_dims = ndim
        args.byte_strides = None
        args.num_byte_strides = 0
        args.host_buffer_semantics = capi.HOST_IMMUTABLE_ONLY_DURING_CALL
        args.device_layout = None
        if memory_handle is None:
            args.device, args.memory = target.handle, None
        else:
            args.device, args.memory = None, memory_handle
        # ctypes.c_char.from_buffer takes the pointer of a writeable array that exports a buffer: not of
        # an empty one, nor of dtypes numpy cannot describe in a buffer (bfloat16 from ml_dtypes).
        by_buffer = math.prod(shape) > 0
        if by_buffer:
            try:
                ctypes.c_char.from_buffer(np.empty(1, np_dtype))  # type: ignore[arg-type]
            except (TypeError, ValueError, BufferError):
                by_buffer = False
        event_args = self.api.args("PJRT_Event_Destroy")  # for its done_with_host_buffer
        slot = (args, ctypes.addressof(args), dtype, by_buffer, event_args, ctypes.addressof(event_args))
        local = self._uploads
        slots = getattr(local, "slots", None)
        if slots is None or len(slots) >= UPLOAD_SLOTS:
            slots = local.slots = {}
        slots[key] = slot
        return slot

    # -- programs ----------------------------------------------------------------

    def compile(self, program: str | bytes, options: CompileOptions | None = None, *,
                format: str = "mlir", cache: bool = True) -> Executable:
        """Compile StableHLO (MLIR text or bytecode) or another `format` the plugin takes ("hlo").

        Executables are cached on (program, format, options); `cache=False` always compiles.
        CompileError carries the compiler's message.
        """
        op = "PJRT_Client_Compile"
        client = self._check_open(op)
        code = normalise_program(program, op)
        options = options or CompileOptions()
        if not isinstance(options, CompileOptions):
            raise InvalidArgument(BACKEND, op, detail=f"options must be CompileOptions, got {type(options).__name__}")
        if not isinstance(format, str) or not format or not format.isascii():
            raise InvalidArgument(BACKEND, op, detail=f"format must be a non-empty ASCII str such as 'mlir' or "
                                  f"'hlo', got {format!r}")
        key = (code, format, options)
        if cache:
            with self._lock:
                hit = self._cache.get(key)
                if hit is not None and not hit.closed:
                    self._cache.move_to_end(key)
                    return hit
        serialized = options.serialize()
        fmt = format.encode()
        program_struct = capi.Program(code=ctypes.cast(ctypes.c_char_p(code), c_void_p).value, code_size=len(code),
                                      format=fmt, format_size=len(fmt))
        program_struct.struct_size = capi.Program.STRUCT_SIZE
        options_buffer = ctypes.create_string_buffer(serialized, len(serialized))
        args = self.api.args(op, client=client, program=ctypes.addressof(program_struct),
                             compile_options=ctypes.addressof(options_buffer), compile_options_size=len(serialized))
        self.api.call(op, args)
        executable = Executable(self, args.executable, options, main_signature(code) if format == "mlir" else None)
        if cache:
            with self._lock:
                self._cache[key] = executable
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
        return executable

    def cached_executables(self) -> int:
        """How many executables the cache holds."""
        return len(self._cache)

    def clear_cache(self) -> None:
        """Drop the compiled executables this client cached, so the next compile runs again."""
        with self._lock:
            self._cache.clear()

    # -- helpers used by executables --------------------------------------------------

    def devices_of(self, pointers: Sequence[int]) -> list[DeviceInfo]:
        """This client's devices for the given PJRT device pointers; Unsupported for a device it does not address."""
        by_handle = {d.handle: d for d in self.devices}
        missing = [p for p in pointers if p not in by_handle]
        if missing:
            raise Unsupported(BACKEND, "PJRT_LoadedExecutable_AddressableDevices",
                              "the executable runs on devices this client does not address")
        return [by_handle[p] for p in pointers]
