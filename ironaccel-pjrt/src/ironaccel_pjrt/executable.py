"""`Executable`: a compiled `PJRT_LoadedExecutable`, run on one device or several.

`execute(args)` runs a single-device executable on a list of argument
buffers and returns its outputs as `Buffer`s, without waiting (`to_host` or
`block_until_ready` wait).  `execute_sharded(arg_lists)` runs a multi-device
executable (replicas x partitions) with one argument list per device, in the
order of `devices`.  Output element types and shapes are read once, at
compile time, so a launch is one C call plus the Python that packs pointers.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from ctypes import c_void_p
from typing import TYPE_CHECKING, Any, cast

from ironaccel.errors import ClosedError, DriverError, InvalidArgument, Unsupported
from ironaccel.types import DType

from .api import BACKEND, _string
from .buffer import Buffer, destroy_dropped
from .dtypes import from_pjrt
from .signature import Parameter

if TYPE_CHECKING:
    from .client import Client, DeviceInfo
    from .options import CompileOptions

__all__ = ["Executable", "normalise_program"]


def argument_list(args: Any, op: str, what: str = "args") -> Sequence[Any]:
    """`args` when it is a list or tuple (or another sequence), else InvalidArgument naming `op`."""
    if type(args) is list or type(args) is tuple:
        return cast(Sequence[Any], args)
    if isinstance(args, Sequence) and not isinstance(args, (str, bytes, bytearray, memoryview)):
        return args
    raise InvalidArgument(BACKEND, op, detail=f"{what} must be a list or tuple of pjrt Buffers, got "
                          f"{type(args).__name__}")


def normalise_program(program: Any, op: str) -> bytes:
    """MLIR text (str or bytes) or MLIR bytecode, as the bytes PJRT_Program carries."""
    if isinstance(program, str):
        try:
            code = program.encode()
        except UnicodeEncodeError as exc:
            raise InvalidArgument(BACKEND, op, detail=f"program text holds a lone surrogate at index {exc.start}; "
                                  "it must be encodable as UTF-8") from None
    elif isinstance(program, (bytes, bytearray, memoryview)):
        code = bytes(program)
    else:
        raise InvalidArgument(BACKEND, op, detail=f"program must be str or bytes, got {type(program).__name__}")
    if not code.strip():
        raise InvalidArgument(BACKEND, op, detail="program is empty")
    return code


class Executable:
    """A loaded executable: `devices` it runs on, `num_outputs`, `output_dtypes`, `output_shapes`."""

    def __init__(self, client: Client, handle: int, options: CompileOptions,
                 parameters: list[Parameter] | None = None):
        self.client = client
        self.options = options
        #: The program's parameters when its MLIR text could be read, else None (see `signature`).
        self.parameters = parameters
        # Sharded (SPMD) programs take per-device shards, whose shapes differ from the signature's.
        self._check_shapes = options.num_partitions == 1
        self._handle: int | None = handle
        client._track(self)
        api = client.api
        try:
            self._read_metadata()
        except Exception:
            self.delete()
            raise
        self._np_dtypes = [dt.numpy for dt in self.output_dtypes]
        self._options = api.args("PJRT_ExecuteOptions")
        self._execute_fn = api.function("PJRT_LoadedExecutable_Execute")
        # Exact (shape, dtype) per parameter when every one is static: a launch then checks by tuple compare.
        self._exact: list[tuple[tuple[int, ...], DType]] | None = None
        if parameters is not None and self._check_shapes and all(
                p.shape is not None and None not in p.shape and p.dtype is not None for p in parameters):
            self._exact = [(cast(tuple, p.shape), cast(DType, p.dtype)) for p in parameters]
        # Preallocated single-device launch: argument row, output row, and the Execute args pointing at them.
        self._launch_lock = threading.Lock()
        self._row = (c_void_p * max(len(parameters or ()), 8))()
        self._out = (c_void_p * max(self.num_outputs, 1))()
        self._row_list = (c_void_p * 1)(ctypes.addressof(self._row))
        self._out_list = (c_void_p * 1)(ctypes.addressof(self._out))
        self._one = api.args("PJRT_LoadedExecutable_Execute", options=ctypes.addressof(self._options),
                             argument_lists=ctypes.addressof(self._row_list), num_devices=1,
                             output_lists=ctypes.addressof(self._out_list))
        self._one_address = ctypes.addressof(self._one)
        #: (shape, DType, numpy dtype) per output, for the Buffers a launch returns.
        self._outputs = list(zip(self.output_shapes, self.output_dtypes, self._np_dtypes))
        #: The one device of a single-device, non-portable executable: `execute(args)` launches there at once.
        self._single: DeviceInfo | None = self.devices[0] if len(self.devices) == 1 else None

    # -- metadata ---------------------------------------------------------------

    def _read_metadata(self) -> None:
        api = self.client.api
        loaded = self._handle
        args = api.args("PJRT_LoadedExecutable_AddressableDevices", executable=loaded)
        api.call("PJRT_LoadedExecutable_AddressableDevices", args)
        pointers = ctypes.cast(args.addressable_devices, ctypes.POINTER(c_void_p))
        self.devices: list[DeviceInfo] = self.client.devices_of([pointers[i] for i in range(
            args.num_addressable_devices)])
        get = api.args("PJRT_LoadedExecutable_GetExecutable", loaded_executable=loaded)
        api.call("PJRT_LoadedExecutable_GetExecutable", get)
        exe = get.executable
        try:
            self.name = self._query_string(exe, "PJRT_Executable_Name", "executable_name")
            self.num_outputs = int(self._query(exe, "PJRT_Executable_NumOutputs", "num_outputs"))
            self.num_replicas = int(self._query(exe, "PJRT_Executable_NumReplicas", "num_replicas"))
            self.num_partitions = int(self._query(exe, "PJRT_Executable_NumPartitions", "num_partitions"))
            self.output_dtypes, self.output_shapes = self._output_signature(exe)
        finally:
            api.call("PJRT_Executable_Destroy", api.args("PJRT_Executable_Destroy", executable=exe))

    def _query(self, exe: int, op: str, field: str) -> Any:
        args = self.client.api.args(op, executable=exe)
        self.client.api.call(op, args)
        return getattr(args, field)

    def _query_string(self, exe: int, op: str, field: str) -> str:
        args = self.client.api.args(op, executable=exe)
        self.client.api.call(op, args)
        return _string(getattr(args, field), getattr(args, f"{field}_size"))

    def _output_signature(self, exe: int) -> tuple[list[DType], list[tuple[int, ...]]]:
        api = self.client.api
        n = self.num_outputs
        op = "PJRT_Executable_OutputElementTypes"
        if not api.has(op) or not api.has("PJRT_Executable_OutputDimensions"):
            raise Unsupported(BACKEND, op, f"PJRT API {api.version_string} cannot describe executable outputs")
        types = api.args(op, executable=exe)
        api.call(op, types)
        dtypes = [from_pjrt(types.output_types[i], op) for i in range(types.num_output_types)]
        dims = api.args("PJRT_Executable_OutputDimensions", executable=exe)
        api.call("PJRT_Executable_OutputDimensions", dims)
        shapes, at = [], 0
        for i in range(dims.num_outputs):
            rank = dims.dim_sizes[i]
            shapes.append(tuple(int(dims.dims[at + k]) for k in range(rank)))
            at += rank
        if len(dtypes) != n or len(shapes) != n:
            raise DriverError(BACKEND, op, detail=f"plugin reported {len(dtypes)} types and {len(shapes)} shapes "
                              f"for {n} outputs")
        return dtypes, shapes

    @property
    def closed(self) -> bool:
        """Whether the executable was closed (its PJRT executable destroyed)."""
        return self._handle is None

    def __repr__(self) -> str:
        return (f"<pjrt Executable {self.name!r} {self.num_replicas}x{self.num_partitions} on "
                f"{[d.id for d in self.devices]} -> {self.num_outputs} outputs>")

    # -- execution ------------------------------------------------------------------

    def _argument_handles(self, args: Sequence[Buffer], op: str) -> list[int]:
        if type(args) is not list and type(args) is not tuple:
            args = argument_list(args, op)
        exact, client = self._exact, self.client
        if exact is not None and len(args) == len(exact):
            handles = []
            for buf, (shape, dtype) in zip(args, exact):
                handle = getattr(buf, "_handle", None)
                if (handle is None or type(buf) is not Buffer or buf.client is not client or buf.shape != shape
                        or buf.dtype is not dtype):
                    return self._checked_handles(args, op)  # raises the precise error
                handles.append(handle)
            return handles
        return self._checked_handles(args, op)

    def _checked_handles(self, args: Sequence[Buffer], op: str) -> list[int]:
        params = self.parameters
        if params is not None and len(args) != len(params):
            raise InvalidArgument(BACKEND, op, detail=(
                f"the program takes {len(params)} arguments ({', '.join(p.describe() for p in params)}), "
                f"got {len(args)}"))
        handles = []
        for i, buf in enumerate(args):
            if not isinstance(buf, Buffer):
                raise InvalidArgument(BACKEND, op, detail=f"argument {i} is {type(buf).__name__}, not a pjrt Buffer")
            if buf.client is not self.client:
                raise InvalidArgument(BACKEND, op, detail=f"argument {i} belongs to another client")
            if params is not None and not params[i].accepts(buf.shape, buf.dtype, self._check_shapes):
                raise InvalidArgument(BACKEND, op, detail=(
                    f"argument {i} is {buf.dtype.value}{list(buf.shape)}; the program takes {params[i].describe()}"))
            handles.append(buf.handle(op))
        return handles

    def execute(self, args: Sequence[Buffer], device: DeviceInfo | None = None) -> list[Buffer]:
        """Run on one device; returns the outputs without waiting.

        `device` is needed only for a portable executable (`CompileOptions(portable=True)`),
        which runs on whichever device it is given.
        """
        if device is None and self._single is not None:
            return self._launch_one(args, self._single, None)
        op = "PJRT_LoadedExecutable_Execute"
        if device is not None:
            if not self.options.portable:
                raise InvalidArgument(BACKEND, op, detail=(
                    "only a portable executable (CompileOptions(portable=True)) takes a device; this one is "
                    f"pinned to {[d.id for d in self.devices]}"))
            if getattr(device, "client", None) is not self.client:
                raise InvalidArgument(BACKEND, op, detail="the device belongs to another client")
            return self._launch_one(args, device, device.handle)
        if len(self.devices) != 1:
            raise InvalidArgument(BACKEND, op, detail=(
                "a portable executable needs device=" if not self.devices else
                f"the executable runs on {len(self.devices)} devices; use execute_sharded"))
        return self._launch_one(args, self.devices[0], None)

    def _launch_one(self, args: Sequence[Buffer], device: DeviceInfo, execute_device: int | None) -> list[Buffer]:
        """The single-device launch, through the preallocated rows (the hot path)."""
        op = "PJRT_LoadedExecutable_Execute"
        handle = self._handle
        if handle is None:
            raise ClosedError(BACKEND, op, "client" if self.client.closed else "executable")
        handles = self._argument_handles(args, op)
        n = len(handles)
        with self._launch_lock:
            row = self._row
            if n > len(row):
                row = self._row = (c_void_p * n)()
                self._row_list[0] = ctypes.addressof(row)
            i = 0
            for h in handles:
                row[i] = h
                i += 1
            one = self._one
            one.executable = handle
            one.num_args = n
            one.execute_device = execute_device
            error = self._execute_fn(self._one_address)
            outs = self._out[: self.num_outputs]
        if error:
            raise self.client.api.take_error(op, error)
        client, outputs = self.client, self._outputs
        if client._dropped:
            destroy_dropped(client)  # while the computation runs
        if len(outs) == 1:
            shape, dtype, np_dtype = outputs[0]
            return [Buffer(client, cast(int, outs[0]), device, shape, dtype, np_dtype)]
        return [Buffer(client, cast(int, out), device, *output) for out, output in zip(outs, outputs)]

    def execute_sharded(self, arg_lists: Sequence[Sequence[Buffer]]) -> list[list[Buffer]]:
        """Run on every device of the executable: `arg_lists[i]` feeds `devices[i]`; outputs per device."""
        return self._launch(arg_lists, self.devices, None)

    def _launch(self, arg_lists: Sequence[Sequence[Buffer]], devices: Sequence[DeviceInfo],
                execute_device: int | None) -> list[list[Buffer]]:
        op = "PJRT_LoadedExecutable_Execute"
        handle = self._handle
        if handle is None:
            raise ClosedError(BACKEND, op, "client" if self.client.closed else "executable")
        num_devices = len(devices)
        arg_lists = [argument_list(row, op) for row in argument_list(arg_lists, op, "arg_lists")]
        if len(arg_lists) != num_devices:
            raise InvalidArgument(BACKEND, op, detail=(
                f"{len(arg_lists)} argument lists for an executable on {num_devices} devices"))
        num_args = len(arg_lists[0]) if num_devices else 0
        rows = []
        for arg_list in arg_lists:
            if len(arg_list) != num_args:
                raise InvalidArgument(BACKEND, op, detail="every device needs the same number of arguments")
            handles = self._argument_handles(arg_list, op)
            rows.append((c_void_p * max(num_args, 1))(*handles))
        argument_lists = (c_void_p * num_devices)(*[ctypes.addressof(r) for r in rows])
        n_out = self.num_outputs
        outputs = [(c_void_p * max(n_out, 1))() for _ in range(num_devices)]
        output_lists = (c_void_p * num_devices)(*[ctypes.addressof(o) for o in outputs])
        api = self.client.api
        exe_args = api.args(op, executable=handle, options=ctypes.addressof(self._options),
                            argument_lists=ctypes.addressof(argument_lists), num_devices=num_devices,
                            num_args=num_args, output_lists=ctypes.addressof(output_lists),
                            execute_device=execute_device)
        error = self._execute_fn(ctypes.addressof(exe_args))
        if error:
            raise api.take_error(op, error)
        client, dtypes, shapes, np_dtypes = self.client, self.output_dtypes, self.output_shapes, self._np_dtypes
        if client._dropped:
            destroy_dropped(client)  # while the computation runs
        return [
            [Buffer(client, cast(int, out[j]), device, shapes[j], dtypes[j], np_dtypes[j]) for j in range(n_out)]
            for out, device in zip(outputs, devices)
        ]

    def __call__(self, *args: Buffer) -> list[Buffer]:
        return self.execute(args)

    # -- lifetime ----------------------------------------------------------------------

    def delete(self) -> None:
        """Destroy the executable; a second call is a no-op."""
        handle, self._handle = self._handle, None
        if handle is not None and not self.client.closed:
            self.client._untrack(self)
            api = self.client.api
            api.call("PJRT_LoadedExecutable_Destroy", api.args("PJRT_LoadedExecutable_Destroy", executable=handle))

    close = delete

    def _invalidate(self) -> None:
        self._handle = None

    def __del__(self) -> None:
        try:
            self.delete()
        except Exception:
            pass

