"""Library: device code loaded once for every device and context (cuLibraryLoadData).

    lib = cu.Library(cu.Program(src).compile())        # no device or context needed
    fn = lib.function("saxpy", dev)                    # a Function of dev (its CUkernel)
    fn.launch(grid, block, *args, stream=s)            # s: any stream of dev, green-context streams included
    coeffs = lib.get_global("coeffs", dev, "float32")  # a DeviceBuf over dev's copy of a __constant__

A kernel of a library (a CUkernel) is launched through the same `Function`
as a module's: the driver accepts it where a CUfunction goes and runs it in
the context of the stream it is launched on -- which is what green contexts
need.  Globals exist once per device.  `close()` unloads the library; its
Functions and global views are closed with it.  `disown()` hands the
unloading to whoever holds the CUlibrary handle.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from . import _driver
from ._devices import open_device
from ._driver import call, driver, try_call
from .errors import closed, driver_error, invalid
from .module import Function, _symbol, close_contents, global_view, loadable_image, param_types

if TYPE_CHECKING:
    from .device import Device

__all__ = ["Library", "kernel_function"]


class Library:
    """Context-independent device code (CUBIN, PTX or fatbin; an ObjectCode, bytes or a path)."""

    _owned = True  # False after disown(): close() and collection leave the CUlibrary loaded

    def __init__(self, code: Any):
        op = "cuLibraryLoadData"
        image, self.name_map, self.kind = loadable_image(code, op)
        self.param_types = param_types(code, image, self.kind)
        self._h: Any = call(op, image, None, None, 0, None, None, 0)
        self._lock = threading.Lock()
        self._functions: dict[tuple[str, int], Function] = {}
        self._views: dict[tuple[str, int, str], Any] = {}

    @property
    def closed(self) -> bool:
        """Whether the library was unloaded; its Functions and global views are closed with it."""
        return self._h is None

    def _check(self, op: str) -> None:
        if self._h is None:
            raise closed(op, "library")

    def function(self, name: str, device: Device) -> Function:
        """The kernel `name` (a name expression or a symbol) as a Function of `device` (cuLibraryGetKernel)."""
        op = "cuLibraryGetKernel"
        self._check(op)
        dev = open_device(device, op)
        if not isinstance(name, str) or not name:
            raise invalid(op, f"function name must be a non-empty str, got {name!r}")
        key = (name, dev.ordinal)
        with self._lock:
            fn = self._functions.get(key)
            if fn is not None:
                return fn
            symbol = _symbol(self.name_map, name, op)
            err, kernel = try_call(op, self._h, symbol)
            if err:
                known = f"; name expressions: {sorted(self.name_map)}" if self.name_map else ""
                raise driver_error(err, op, f"no kernel {name!r} (symbol {symbol.decode()!r}) in this library{known}")
            # Tried: loading the kernel into the primary context here (cuKernelGetFunction) and settling that load
            # (module.settle_lazy_load).  The first launch still left waits slow
            # (bench/experiments/ab_settle.py), and launches on green-context streams then ran on the whole
            # device (test_green_contexts_run_on_disjoint_sms failed).  Also tried: settling after the first
            # launch, at once, after a sync or 2 ms later: no effect; only cuCtxSynchronize ended
            # it (bench/experiments/probe_library_load.py).  A library kernel is left to load at launch.
            fn = Function._make(int(kernel), self, name, kernel=kernel, device=dev,
                                types=self.param_types.get(symbol.decode()))
            self._functions[key] = fn
            return fn

    def get_global(self, name: str, device: Device, dtype: Any = "uint8") -> Any:
        """A DeviceBuf over `device`'s copy of the `__device__` / `__constant__` variable `name`
        (cuLibraryGetGlobal); see `Module.get_global`."""
        op = "cuLibraryGetGlobal"
        self._check(op)
        dev = open_device(device, op)
        if not isinstance(name, str) or not name:
            raise invalid(op, f"the global's name must be a non-empty str, got {name!r}")
        key = (name, dev.ordinal, str(dtype))
        with self._lock:
            view = self._views.get(key)
            if view is not None and not view.closed:
                return view
            dev._bind_here()
            err, out = try_call(op, self._h, _symbol(self.name_map, name, op))
            if err:
                raise driver_error(err, op, f"no __device__ or __constant__ variable {name!r} in this library")
            view = self._views[key] = global_view(dev, int(out[0]), int(out[1]), dtype, name, op, self)
            return view

    def module_handle(self, device: Device) -> int:
        """The CUmodule address of this library in `device`'s primary context (cuLibraryGetModule), for APIs that
        take a module; like other Device calls, it makes that context current on the calling thread.  The
        module lives as long as the library."""
        op = "cuLibraryGetModule"
        self._check(op)
        dev = open_device(device, op)
        dev._bind_here()
        return int(call(op, self._h))

    def disown(self) -> int:
        """Hand the library's unloading to whoever holds its handle: the CUlibrary address.

        The library stays loaded and this Library usable, but neither `close()` nor collection unloads it any more:
        the holder of the handle calls cuLibraryUnload when it is done (and this Library's Functions and global
        views must not be used after that), or the library stays loaded for the life of the process.  For code
        that hands the CUlibrary to another owner (a cuda.core ObjectCode's `handle`, which its clients unload
        themselves).  ClosedError once closed.  Idempotent.
        """
        self._check("Library.disown")
        self._owned = False
        return int(self._h)

    @property
    def owned(self) -> bool:
        """Whether `close()` (or collection) unloads the library: True until `disown()`."""
        return self._owned

    def close(self) -> None:
        """Unload the library (cuLibraryUnload), unless it was disowned; its Functions and global views are
        closed.  Idempotent."""
        h = self._h
        if h is None:
            return
        self._h = None
        close_contents(self)

        if self._owned and not _driver.forked:
            call("cuLibraryUnload", h)

    def __enter__(self) -> Library:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_h", None) is not None:
            try:
                self.close()
            except Exception:
                pass

    def __repr__(self) -> str:
        return f"<Library {self.kind}{' closed' if self._h is None else ''}>"


def kernel_function(kernel: int) -> int:
    """The address of the CUfunction of a CUkernel (a library's kernel, ours or another library's) in the context
    current on the calling thread, loading the kernel there if it was not (cuKernelGetFunction): for the calls
    that take only a CUfunction.  `Library.function` is the form for a Library of ours."""
    op = "cuKernelGetFunction"
    if isinstance(kernel, bool) or not isinstance(kernel, int) or not 0 < kernel < 1 << 64:
        raise invalid(op, f"expected a CUkernel address (a positive int below 2**64), got {kernel!r}")
    return int(call(op, driver().CUkernel(kernel)))
