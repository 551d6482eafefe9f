"""Modules, kernels and launches with PyCUDA's argument semantics; the launch is ironaccel's hot call.

PyCUDA packs kernel arguments into one buffer with a struct format and hands
the driver that buffer (`CU_LAUNCH_PARAM_BUFFER_POINTER`), which reads each
parameter at the kernel's own offset.  Here the same bytes are packed (with
`struct`, native alignment, in a per-thread block prepared once per kernel)
and the driver gets a `void*` array pointing at the kernel's parameter
offsets in that block (from `cuFuncGetParamInfo`), which reads exactly the
same bytes.  So a format that disagrees with the kernel misbehaves exactly as
it does under PyCUDA; a block shorter than the kernel's parameters is
refused before the launch.

`Function.__call__` packs by Python type as PyCUDA does: numpy scalars by
dtype, `DeviceAllocation`/pooled allocations/`In`/`Out`/`InOut` and
`__cuda_array_interface__` objects (or `.gpudata`) as pointers, ndarrays and
numpy structured scalars by value as their bytes; plain Python ints and
floats are refused (TypeError), as in PyCUDA.  Argument signatures made only
of numpy scalars and allocations are planned once per signature.
"""

from __future__ import annotations

import ctypes
import struct
import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from cuda.bindings import driver as _cb

import ironaccel_cuda as cu
from ironaccel import errors as ia
from ironaccel_cuda.module import settle_lazy_load

from . import _fast
from ._context import Context, _current, _flags, _local, call, cleanup, enum_value, guarded, run_in
from ._enums import function_attribute
from ._errors import bad_input, bad_type, from_code, invalid, translate, unsupported
from ._memory import DeviceAllocation, ManagedAllocation, mem_alloc, memcpy_dtoh, memcpy_htod

__all__ = ["Module", "Function", "ArgumentHandler", "In", "Out", "InOut", "module_from_buffer", "module_from_file"]

_LEGACY = _fast.LEGACY
_NO_STREAM = object()  # what a slot's last launch records for "the legacy stream of the kernel's context"
_launch = _fast.launch
_ensure = _fast.ensure
_number = np.number
_ndarray = np.ndarray
_void = np.void


# -- modules ------------------------------------------------------------------------


class Module:
    """pycuda.driver.Module: code loaded into the context that was current."""

    __slots__ = ("handle", "_h", "_ctx", "_settled", "__weakref__")
    handle: int
    _h: Any
    _ctx: Context
    _settled: set[str]

    def __init__(self) -> None:
        raise bad_type("Module", "load modules with module_from_buffer() / module_from_file() or SourceModule")

    @classmethod
    def _make(cls, h: Any, ctx: Context) -> Module:
        m = object.__new__(cls)
        m._h = h
        m.handle = int(h)
        m._ctx = ctx
        m._settled = set()  # kernel names whose lazy load was settled (see settle_lazy_load)
        return m

    def get_function(self, name: str) -> Function:
        op = "cuModuleGetFunction"
        _in_context(self._ctx, op)
        h = _cb.CUfunction(guarded(op, cu.module_function, self.handle, _name(name, op)))
        if name not in self._settled:
            self._settled.add(name)
            settle_lazy_load(self._ctx._h)
        return Function._make(h, self, name)

    def get_global(self, name: str) -> tuple[int, int]:
        """(device address, size in bytes) of global or __constant__ variable `name`."""
        op = "cuModuleGetGlobal"
        _in_context(self._ctx, op)
        dp, size = guarded(op, cu.module_global, self.handle, _name(name, op))
        return int(dp), int(size)

    def get_texref(self, name: str) -> Any:
        raise unsupported("cuModuleGetTexRef", "texture references were removed in CUDA 12")

    def get_surfref(self, name: str) -> Any:
        raise unsupported("cuModuleGetSurfRef", "surface references were removed in CUDA 12")

    def __del__(self) -> None:
        try:
            ctx = self._ctx
            h = self.handle
            cleanup("module", ctx, lambda: guarded("cuModuleUnload", cu.unload_module, h))
        except Exception:
            pass


def _name(name: Any, routine: str) -> str:
    if not isinstance(name, str):
        raise bad_type(routine, f"name must be a str, not {type(name).__name__}")
    return name


def _in_context(ctx: Context, routine: str) -> None:
    """Make `ctx` current for a cold call: it must be this thread's current context, as in PyCUDA."""
    if not ctx._valid:
        raise from_code(201, routine, "the context of this object was detached")
    _current(routine)


def module_from_buffer(buffer: Any, options: Sequence[Any] = (), message_handler: Any = None) -> Module:
    """Load CUBIN, PTX or fatbin bytes into the current context (ironaccel_cuda.load_module_image)."""
    ctx = _current("cuModuleLoadDataEx")
    try:
        image = bytes(memoryview(buffer).cast("B"))
    except (TypeError, ValueError) as exc:
        raise bad_input("cuModuleLoadDataEx", exc) from None
    if not options and message_handler is None:
        op = "cuModuleLoadData"
        return Module._make(_cb.CUmodule(guarded(op, cu.load_module_image, image)), ctx)
    op = "cuModuleLoadDataEx"
    try:
        pairs = [(key, value) for key, value in options]
    except (TypeError, ValueError):
        raise bad_type(op, "options must be (jit_option, value) pairs") from None
    jit = [(enum_value("CUjit_option", key, op), value) for key, value in pairs]
    log = cu.JitLog()  # the JIT's logs, for the handler, whether or not the load succeeds
    module: Module | None = None
    try:
        module = Module._make(_cb.CUmodule(guarded(op, cu.load_module_image, image, jit_options=jit, log=log)), ctx)
    except Exception as exc:
        failure: BaseException | None = exc
    else:
        failure = None
    if message_handler is not None:  # if it raises, the module made above is unloaded when collected
        message_handler(module is not None, log.info, log.error)
    if failure is not None:
        raise failure
    return module  # type: ignore[return-value]


def module_from_file(filename: str) -> Module:
    """Load a module file into the current context (ironaccel_cuda.load_module_file)."""
    ctx = _current("cuModuleLoad")
    return Module._make(_cb.CUmodule(guarded("cuModuleLoad", cu.load_module_file, str(filename))), ctx)


# -- argument handlers (In / Out / InOut) ------------------------------------------------


class ArgumentHandler:
    """Wraps a host array for a kernel call: device memory is allocated, copied to or from it."""

    def __init__(self, ary: Any):
        self.array = ary
        self.dev_alloc: DeviceAllocation | None = None

    def get_device_alloc(self) -> DeviceAllocation:
        if self.dev_alloc is None:
            try:
                nbytes = self.array.nbytes
            except AttributeError:
                raise bad_type("ArgumentHandler", f"could not determine array length of '{type(self.array)}': "
                               "unsupported array type or not an array") from None
            self.dev_alloc = mem_alloc(nbytes)
        return self.dev_alloc

    def pre_call(self, stream: Any) -> None:
        pass


class In(ArgumentHandler):
    """Copy the array to the device before the launch."""

    def pre_call(self, stream: Any) -> None:
        memcpy_htod(self.get_device_alloc(), self.array)


class Out(ArgumentHandler):
    """Copy the device memory back into the array after the launch."""

    def post_call(self, stream: Any) -> None:
        memcpy_dtoh(self.array, self.get_device_alloc())


class InOut(In, Out):
    """Both."""


# -- formats and packing ----------------------------------------------------------------

_structs: dict[str, struct.Struct] = {}


def _struct(fmt: str, routine: str) -> struct.Struct:
    s = _structs.get(fmt)
    if s is None:
        try:
            s = struct.Struct(fmt)
        except struct.error as exc:
            raise invalid(routine, f"bad argument format {fmt!r}: {exc}") from None
        _structs[fmt] = s
    return s


def _tokens(fmt: str) -> list[tuple[int, str]]:
    """(count, code) items of a struct format; a count before 's' is its byte length."""
    out, i = [], 0
    while i < len(fmt):
        j = i
        while j < len(fmt) and fmt[j].isdigit():
            j += 1
        if j >= len(fmt):
            break
        count = int(fmt[i:j]) if j > i else 1
        code = fmt[j]
        if not code.isspace():
            out.append((count, code))
        i = j + 1
    return out


class _Prep:
    """How one argument format packs: `pack(buffer, 0, *args)`, its size and its item offsets."""

    __slots__ = ("fmt", "pack", "size", "offsets")
    pack: Any

    def __init__(self, fmt: str, routine: str):
        self.fmt = fmt
        tokens = _tokens(fmt)
        if any(code in "FD" for _, code in tokens):
            native = "".join(f"{2 * n}f" if c == "F" else f"{2 * n}d" if c == "D" else f"{n}{c}" for n, c in tokens)
            s = _struct(native, routine)
            self.pack = _Converting(tokens, s).pack_into
        elif any(code == "s" for _, code in tokens):
            s = _struct(fmt, routine)
            self.pack = _Converting(tokens, s).pack_into
        else:
            s = _struct(fmt, routine)
            self.pack = s.pack_into
        self.size = s.size
        self.offsets = _offsets(tokens)


_NATIVE = {"F": "2f", "D": "2d"}  # PyCUDA's complex codes, as CPython's struct lays them out


def _offsets(tokens: list[tuple[int, str]]) -> tuple[int, ...]:
    """Offsets of the parameters a format describes (native alignment), for kernels of unknown layout."""
    offsets, prefix = [], ""
    for count, code in tokens:
        if code == "x":
            prefix += f"{count}x"
            continue
        items = [f"{count}{code}"] if code in "sp" else [_NATIVE.get(code, code)] * count
        for piece in items:
            size = struct.calcsize(piece)
            end = struct.calcsize(prefix + piece)
            offsets.append(end - size)
            prefix += piece
    return tuple(offsets)


class _Converting:
    """Packs formats CPython's struct cannot take as given: 's' items from any buffer, complex F/D."""

    __slots__ = ("tokens", "struct")

    def __init__(self, tokens: list[tuple[int, str]], s: struct.Struct):
        self.tokens = tokens
        self.struct = s

    def pack_into(self, buf: Any, offset: int, *args: Any) -> None:
        values: list[Any] = []
        it = iter(args)
        try:
            for count, code in self.tokens:
                if code == "x":
                    continue
                if code in "sp":
                    values.append(_as_bytes(next(it)))
                elif code in "FD":
                    for _ in range(count):
                        z = complex(next(it))
                        values += (z.real, z.imag)
                else:
                    values += [next(it) for _ in range(count)]
        except StopIteration:
            raise struct.error(f"pack expected more than {len(args)} items for packing") from None
        rest = list(it)
        if rest:
            raise struct.error(f"pack expected {len(args) - len(rest)} items for packing (got {len(args)})")
        self.struct.pack_into(buf, offset, *values)


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, (_ndarray, _void)):
        return value.tobytes()
    return bytes(memoryview(value))


class _Slot:
    """One thread's argument block for one kernel: the bytes, the void* array the driver reads, the packer
    bound to the block (`pack(*args)`), and the last launch bound in full (`ready()`, for the same grid,
    block, stream and shared memory as `r_grid`, `r_block`, `r_s`, `r_shared`)."""

    __slots__ = ("buf", "cap", "params", "prep", "pack", "ready", "r_grid", "r_block", "r_s", "r_shared",
                 "_pointers")
    buf: Any
    cap: int
    params: int
    prep: _Prep | None
    pack: Any
    ready: Any
    r_grid: Any
    r_block: Any
    r_s: Any
    r_shared: Any
    _pointers: Any


def _dims(value: Any, what: str) -> tuple[Any, Any, Any]:
    try:
        n = len(value)
        if n == 3:
            x, y, z = value[0], value[1], value[2]
        elif n == 2:
            x, y, z = value[0], value[1], 1
        elif n == 1:
            x, y, z = value[0], 1, 1
        elif n == 0:
            return 1, 1, 1
        else:
            raise from_code(400, "function::launch_kernel", f"too many {what} dimensions in kernel launch")
    except (TypeError, KeyError, IndexError):
        raise bad_type("cuLaunchKernel", f"{what} must be a tuple of up to 3 ints, not {value!r}") from None
    if x.__class__ is not int or y.__class__ is not int or z.__class__ is not int:
        x, y, z = (_flags(v, "cuLaunchKernel", f"{what} dimensions") for v in (x, y, z))  # it would truncate floats
    return x, y, z


# -- functions ----------------------------------------------------------------------------


class Function:
    """pycuda.driver.Function: a kernel; call it, or `prepare` a format and use the prepared calls.

    Attributes of the kernel read as `fn.num_regs`, `fn.shared_size_bytes`,
    ... (any `function_attribute` name in lower case).
    """

    __slots__ = ("_h", "_handle", "_module", "_ctx", "_name", "arg_format", "texrefs", "_prep", "_layout",
                 "_layout_end", "_tls", "_plans", "__weakref__")
    _h: Any
    _handle: Any
    _module: Module
    _ctx: Context
    _name: str
    arg_format: str
    texrefs: list[Any]
    _prep: _Prep | None
    _layout: tuple[int, ...] | bool | None
    _layout_end: int
    _tls: threading.local
    _plans: dict[tuple[type, ...], _Prep]

    def __init__(self) -> None:
        raise bad_type("Function", "get kernels with Module.get_function()")

    @classmethod
    def _make(cls, h: Any, module: Module, name: str) -> Function:
        f = object.__new__(cls)
        f._handle = h
        f._h = int(h)
        f._module = module
        f._ctx = module._ctx
        f._name = name
        f.texrefs = []
        f._prep = None
        f._layout = None
        f._layout_end = 0
        f._tls = threading.local()
        f._plans = {}
        return f

    # -- attributes ---------------------------------------------------------------

    def _live(self, op: str) -> Any:
        """The kernel's handle; LogicError if its context was detached (the handle went with it)."""
        if not self._ctx._valid:
            raise from_code(201, op, "the kernel's context was detached")
        return self._handle

    def get_attribute(self, attr: Any) -> int:
        op = "cuFuncGetAttribute"
        return int(call(op, enum_value("CUfunction_attribute", attr, op), self._live(op)))

    def set_attribute(self, attr: Any, value: int) -> None:
        op = "cuFuncSetAttribute"
        call(op, self._live(op), enum_value("CUfunction_attribute", attr, op), _flags(value, op, "value"))

    def set_cache_config(self, fc: Any) -> None:
        op = "cuFuncSetCacheConfig"
        call(op, self._live(op), enum_value("CUfunc_cache", fc, op))

    def set_shared_config(self, config: Any) -> None:
        op = "cuFuncSetSharedMemConfig"
        call(op, self._live(op), enum_value("CUsharedconfig", config, op))

    def param_set_texref(self, texref: Any) -> None:
        raise unsupported("cuParamSetTexRef", "texture references were removed in CUDA 12")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            att = function_attribute[name.upper()]
        except KeyError:
            raise AttributeError(f"no attribute '{name}' in Function") from None
        return self.get_attribute(att)

    # -- prepared calls -------------------------------------------------------------

    def prepare(self, arg_types: Any, texrefs: Any = None) -> Function:
        """Fix the argument format: numpy scalar types, dtypes (structured: their bytes), struct codes;
        anything else is a pointer."""
        fmt = ""
        try:
            arg_types = list(arg_types)
        except TypeError:
            raise bad_type("Function.prepare", f"arg_types must be a sequence of types or a format string, "
                                               f"not {type(arg_types).__name__}") from None
        for t in arg_types:
            if isinstance(t, type) and _number in t.__mro__:
                fmt += np.dtype(t).char
            elif isinstance(t, np.dtype):
                fmt += f"{t.itemsize}s" if t.char == "V" else t.char
            elif isinstance(t, str):
                fmt += t
            else:
                fmt += np.dtype(np.uintp).char
        if texrefs:
            raise unsupported("Function.prepare", "texture references were removed in CUDA 12")
        self.texrefs = []
        self.arg_format = fmt
        self._prep = _prep_for(fmt, "Function.prepare")
        return self

    def prepared_call(self, grid: Any, block: Any, *args: Any, shared_size: int = 0) -> None:
        """Launch with the prepared format on the legacy stream."""
        self.prepared_async_call(grid, block, None, *args, shared_size=shared_size)

    def prepared_async_call(self, grid: Any, block: Any, stream: Any, *args: Any, shared_size: int = 0) -> None:
        """Launch with the prepared format on `stream` (None: the legacy stream)."""
        try:
            slot = self._tls.slot
        except AttributeError:
            slot = self._new_slot()
        prep = self._prep
        if prep is not slot.prep or prep is None:
            slot = self._fit(slot, self._prepared())
        try:
            slot.pack(*args)
        except (struct.error, TypeError, ValueError, OverflowError) as exc:
            raise bad_type("prepared_call", f"the arguments do not fit the format {slot.prep.fmt!r}: {exc}") from None
        try:
            if (stream._h if stream is not None else _NO_STREAM) == slot.r_s and (
                    grid is slot.r_grid or grid == slot.r_grid) and (
                    block is slot.r_block or block == slot.r_block) and shared_size == slot.r_shared:
                if stream is not None:
                    slot.ready()
                    return
                ctx = self._ctx
                stack = _local.stack
                if stack and stack[-1] is ctx:
                    _ensure(ctx.handle)
                    slot.ready()
                    return
        except AttributeError:
            pass  # not a Stream: the general path says so
        except ia.IronAccelError as exc:
            raise translate(exc, "cuLaunchKernel") from None
        self._launch_slot(grid, block, shared_size, stream, slot)

    def _prepared(self) -> _Prep:
        if self._prep is None:
            raise invalid("prepared_call", "call Function.prepare(arg_types) first")
        return self._prep

    def prepared_timed_call(self, grid: Any, block: Any, *args: Any, shared_size: int = 0) -> Any:
        """Launch on the legacy stream between two events; returns a function giving the seconds it took."""
        from ._stream import Event

        start, end = Event(), Event()
        start.record()
        self.prepared_async_call(grid, block, None, *args, shared_size=shared_size)
        end.record()

        def get_call_time() -> float:
            end.synchronize()
            return end.time_since(start) * 1e-3

        return get_call_time

    def _launch_kernel(self, grid: Any, block: Any, arg_buf: Any, shared_mem_bytes: int, stream: Any) -> None:
        """PyCUDA's low-level launch: `arg_buf` is the packed parameter block."""
        try:
            data = bytes(memoryview(arg_buf).cast("B"))
        except (TypeError, ValueError) as exc:
            raise bad_input("cuLaunchKernel", exc) from None
        prep = _prep_for(f"{len(data)}s", "Function._launch_kernel")
        try:
            slot = self._tls.slot
        except AttributeError:
            slot = self._new_slot()
        slot = self._fit(slot, prep)
        ctypes.memmove(ctypes.addressof(slot.buf), data, len(data))
        self._launch_slot(grid, block, shared_mem_bytes, stream, slot)

    # -- plain calls -------------------------------------------------------------------

    def __call__(self, *args: Any, block: Any = None, grid: Any = (1, 1), stream: Any = None, shared: int = 0,
                 texrefs: Any = None, time_kernel: bool = False, **extra: Any) -> Any:
        """Launch with arguments packed by type; keywords block (required), grid, stream, shared, time_kernel."""
        if extra:
            raise invalid("Function.__call__", "extra keyword arguments: {}".format(",".join(extra.keys())))
        if block is None:
            raise invalid("Function.__call__", "must specify block size")
        if texrefs:
            raise unsupported("Function.__call__", "texture references were removed in CUDA 12")
        try:
            slot = self._tls.slot
        except AttributeError:
            slot = self._new_slot()
        prep = self._plans.get(tuple(map(type, args)))
        if prep is not None:
            if prep is not slot.prep:
                slot = self._fit(slot, prep)
            try:
                slot.pack(*args)
            except (struct.error, TypeError, ValueError, OverflowError) as exc:
                raise bad_type("Function.__call__", f"cannot pack the arguments: {exc}") from None
            if not time_kernel:
                try:
                    if (stream._h if stream is not None else _NO_STREAM) == slot.r_s and (
                            grid is slot.r_grid or grid == slot.r_grid) and (
                            block is slot.r_block or block == slot.r_block) and shared == slot.r_shared:
                        if stream is not None:
                            slot.ready()
                            return None
                        ctx = self._ctx
                        stack = _local.stack
                        if stack and stack[-1] is ctx:
                            _ensure(ctx.handle)
                            slot.ready()
                            return None
                except AttributeError:
                    pass  # not a Stream: the general path says so
                except ia.IronAccelError as exc:
                    raise translate(exc, "cuLaunchKernel") from None
                self._launch_slot(grid, block, shared, stream, slot)
                return None
            return self._finish_call(slot, [], grid, block, stream, shared, time_kernel)
        prep, values, handlers = _plan_or_pack(args)
        if values is None:
            self._plans[tuple(map(type, args))] = prep
            values = list(args)
        if prep is not slot.prep:
            slot = self._fit(slot, prep)
        try:
            slot.pack(*values)
        except (struct.error, TypeError, ValueError, OverflowError) as exc:
            raise bad_type("Function.__call__", f"cannot pack the arguments: {exc}") from None
        for handler in handlers:
            handler.pre_call(stream)
        return self._finish_call(slot, handlers, grid, block, stream, shared, time_kernel)

    def _finish_call(self, slot: _Slot, handlers: list[ArgumentHandler], grid: Any, block: Any, stream: Any,
                     shared: int, time_kernel: bool) -> Any:
        post = [h for h in handlers if hasattr(h, "post_call")]
        if stream is None:
            start = 0.0
            if time_kernel:
                Context.synchronize()
                start = time.time()
            self._launch_slot(grid, block, shared, None, slot)
            if post or time_kernel:
                Context.synchronize()
                elapsed = time.time() - start
                for handler in post:
                    handler.post_call(stream)  # type: ignore[attr-defined]
                if time_kernel:
                    return elapsed
            return None
        if time_kernel:
            raise invalid("Function.__call__", "Can't time the kernel on an asynchronous invocation", AssertionError)
        self._launch_slot(grid, block, shared, stream, slot)
        for handler in post:
            handler.post_call(stream)  # type: ignore[attr-defined]
        return None

    # -- launching (shared by the paths above) -----------------------------------------------

    def _launch_slot(self, grid: Any, block: Any, shared: int, stream: Any, slot: _Slot) -> None:
        """Launch the packed block in `slot`, and bind this launch as the slot's `ready()` for the next one."""
        g = _dims(grid, "grid")
        b = _dims(block, "block")
        if shared.__class__ is not int:
            shared = _flags(shared, "cuLaunchKernel", "shared memory size")
        if stream is None:
            ctx = self._ctx
            stack = _local.stack
            if not (stack and stack[-1] is ctx):
                self._launch_elsewhere(g, b, shared, slot)
                return
            _ensure(ctx.handle)
            s = _LEGACY
        else:
            try:
                s = stream._h
            except AttributeError:
                raise bad_type("cuLaunchKernel", f"stream must be a Stream, not {type(stream).__name__}") from None
        try:
            _launch(self._h, g[0], g[1], g[2], b[0], b[1], b[2], shared, s, slot.params)
        except ia.IronAccelError as exc:
            raise translate(exc, "cuLaunchKernel") from None
        except (TypeError, OverflowError) as exc:
            raise bad_input("cuLaunchKernel", exc) from None
        slot.ready = partial(_launch, self._h, g[0], g[1], g[2], b[0], b[1], b[2], shared, s, slot.params)
        slot.r_grid, slot.r_block, slot.r_shared = grid, block, shared
        slot.r_s = _NO_STREAM if stream is None else s

    def _launch_elsewhere(self, g: Any, b: Any, shared: int, slot: _Slot) -> None:
        """The kernel's context is not this thread's current one: launch on its legacy stream, then switch back."""
        if not self._ctx._valid:
            raise from_code(201, "cuLaunchKernel", "the kernel's context was detached")
        try:
            run_in(self._ctx, lambda: _launch(self._h, g[0], g[1], g[2], b[0], b[1], b[2], shared, _LEGACY,
                                              slot.params))
        except ia.IronAccelError as exc:
            raise translate(exc, "cuLaunchKernel") from None
        except (TypeError, OverflowError) as exc:
            raise bad_input("cuLaunchKernel", exc) from None

    def _new_slot(self) -> _Slot:
        slot = _Slot()
        slot.buf = None
        slot.cap = 0
        slot.params = 0
        slot.prep = None
        slot.pack = None
        slot.ready = slot.r_grid = slot.r_block = slot.r_s = slot.r_shared = None
        slot._pointers = None
        self._tls.slot = slot
        return slot

    def _param_layout(self) -> tuple[int, ...] | None:
        """The kernel's parameter offsets (cuFuncGetParamInfo), or None where the driver cannot say."""
        if self._layout is None:
            from ironaccel_cuda.module import function_param_layout

            try:
                layout = function_param_layout(self._handle)
            except ia.IronAccelError:  # no driver to ask (after a fork, say): the launch itself reports it
                layout = None
            if layout is None:
                self._layout = False
            else:
                self._layout = tuple(offset for offset, _ in layout)
                self._layout_end = max((offset + size for offset, size in layout), default=0)
        return None if self._layout is False else self._layout  # type: ignore[return-value]

    def _fit(self, slot: _Slot, prep: _Prep) -> _Slot:
        """Size this thread's block for `prep` and point the parameter array at the kernel's offsets."""
        layout = self._param_layout()
        if layout is None:
            offsets, end = prep.offsets, prep.size
        else:
            offsets, end = layout, self._layout_end
            if prep.size < end:
                raise from_code(1, "cuLaunchKernel", f"the arguments of format {prep.fmt!r} fill {prep.size} bytes; "
                                                     f"kernel {self._name!r} takes {end} bytes of parameters")
        cap = max(prep.size, end, 8)
        if slot.buf is None or cap > slot.cap:
            slot.buf = (ctypes.c_char * cap)()
            slot.cap = cap
        base = ctypes.addressof(slot.buf)
        if offsets:
            pointers = (ctypes.c_void_p * len(offsets))(*[base + off for off in offsets])
            slot._pointers = pointers
            slot.params = ctypes.addressof(pointers)
        else:
            slot._pointers = None
            slot.params = 0
        slot.prep = prep
        slot.pack = partial(prep.pack, slot.buf, 0)
        slot.ready = slot.r_grid = slot.r_block = slot.r_s = slot.r_shared = None  # the block may have moved
        return slot

    def __repr__(self) -> str:
        return f"<Function {self._name}>"


_SIMPLE_POINTERS: tuple[type, ...] = (DeviceAllocation,)


def register_pointer_type(cls: type) -> None:
    """Treat instances of int subclass `cls` as device pointers in kernel calls (pooled allocations)."""
    global _SIMPLE_POINTERS
    _SIMPLE_POINTERS = (*_SIMPLE_POINTERS, cls)


def _plan_or_pack(args: tuple[Any, ...]) -> tuple[_Prep, list[Any] | None, list[ArgumentHandler]]:
    """(prep, None, []) when the argument types alone fix the format (plannable), else (prep, values, handlers)."""
    fmt = ""
    for arg in args:
        t = type(arg)
        if t in _SIMPLE_POINTERS:
            fmt += "P"
        elif isinstance(arg, _number):
            code = arg.dtype.char
            if code in "FD":
                break
            fmt += code
        else:
            break
    else:
        return _prep_for(fmt), None, []
    handlers: list[ArgumentHandler] = []
    values: list[Any] = []
    fmt = ""
    for i, arg in enumerate(args):
        if isinstance(arg, _number):
            values.append(arg)
            fmt += arg.dtype.char
        elif isinstance(arg, _SIMPLE_POINTERS):
            values.append(int(arg))  # type: ignore[call-overload]
            fmt += "P"
        elif isinstance(arg, ArgumentHandler):
            handlers.append(arg)
            values.append(int(arg.get_device_alloc()))
            fmt += "P"
        elif isinstance(arg, _ndarray):
            if isinstance(arg.base, ManagedAllocation):
                values.append(int(arg.base))
                fmt += "P"
            else:
                values.append(arg.tobytes())
                fmt += f"{arg.nbytes}s"
        elif isinstance(arg, _void):
            values.append(arg.tobytes())
            fmt += f"{arg.itemsize}s"
        else:
            cai = getattr(arg, "__cuda_array_interface__", None)
            if cai:
                values.append(cai["data"][0])
                fmt += "P"
                continue
            try:
                gpudata = np.uintp(arg.gpudata)
            except AttributeError:
                raise bad_type("Function.__call__", f"invalid type on parameter #{i} (0-based)") from None
            values.append(int(gpudata))
            fmt += "P"
    return _prep_for(fmt), values, handlers


_preps: dict[str, _Prep] = {}


def _prep_for(fmt: str, routine: str = "Function.__call__") -> _Prep:
    prep = _preps.get(fmt)
    if prep is None:
        prep = _preps[fmt] = _Prep(fmt, routine)
    return prep

