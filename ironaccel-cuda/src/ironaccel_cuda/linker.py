"""Linking device code with nvJitLink: CUBIN, PTX, LTO-IR, fatbin and static libraries into one CUBIN.

    a = cu.Program(src_a, cu.CompileOptions(relocatable_device_code=True)).compile("cubin")
    b = cu.Program(src_b).compile("ltoir")                       # link-time optimised
    code = cu.Linker(a, b, "libfoo.a", device_runtime=True).link()   # CUBIN for the current device
    fn = dev.load_module(code).function("main_kernel")

Inputs are ObjectCode from `Program.compile` (or `link`), bytes (the kind is
read from their headers, which are checked as `load_module` checks them) or
paths (`.a` files are libraries).  Link-time optimisation is on when any input
is LTO-IR.  `device_runtime=True` adds the CUDA device runtime,
`libcudadevrt.a`, which kernels need for dynamic parallelism and for device
calls such as `cudaGraphSetConditional`; it is found with cuda.pathfinder (a
pip install gets it from NVIDIA's `nvidia-cuda-runtime` wheel, in
`nvidia/cu13/lib/`), else in `$CUDA_HOME/lib64`; where it is missing, the link
raises `NotAvailable` saying what to install.  Inputs made for another
architecture than the link's are refused (`InvalidArgument`: nvJitLink would
silently drop them).  nvJitLink comes from NVIDIA's `nvidia-nvjitlink` wheel
(`pip install ironaccel-cuda[link]`) through `cuda.bindings.nvjitlink`; it
must be at least as new as the NVRTC that made LTO-IR inputs.

Where nvJitLink cannot load, `Linker` links through the driver's own JIT linker
(cuLinkCreate/AddData/Complete/Destroy, `DriverLinkSession`) instead, as
cuda.core, CuPy and PyCUDA do: CUBIN, PTX, fatbin, object and library inputs to a
CUBIN.  LTO-IR inputs and PTX output need nvJitLink (`NotAvailable` saying so).
`Linker(..., backend="driver")` picks the driver where both exist;
`link_backend()` says which one `Linker` would use.

Results are cached like compiles (memory, then disk), keyed on every input's
bytes, the options, the architecture and the linker build (nvJitLink's, or the
driver version under cuLink).  `LinkSession` is one uncached nvJitLink handle
(options, inputs, one completion, logs kept after close): `Linker` runs one per
link, the cuda.core compat one per cuda.core Linker; `DriverLinkSession` is the
same for one CUlinkState.
"""

from __future__ import annotations

import ctypes
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

from . import cache
from ._driver import call, driver, try_call
from .errors import BACKEND, CompileError, NotAvailable, closed, code_name, invalid
from .images import check_image, cubin_sm
from .program import ObjectCode, normalize_arch

__all__ = ["DriverLinkSession", "LinkSession", "Linker", "device_runtime_library", "link_backend", "nvjitlink",
           "nvjitlink_log"]

LINK_FIX = "pip install nvidia-nvjitlink (or ironaccel-cuda[link]); cuda.bindings.nvjitlink loads it"
DEVRT_FIX = ("pip install nvidia-cuda-runtime (it ships nvidia/cu13/lib/libcudadevrt.a), or point CUDA_HOME at a "
             "CUDA toolkit")
_AR_MAGIC = b"!<arch>\n"


def _nvjitlink() -> ModuleType:
    try:
        from cuda.bindings import nvjitlink
    except ImportError as exc:
        raise NotAvailable(BACKEND, f"cuda.bindings.nvjitlink cannot be imported: {exc}", fix=LINK_FIX) from exc
    try:
        nvjitlink.version()
    except Exception as exc:  # the library itself is missing
        raise NotAvailable(BACKEND, f"nvJitLink (libnvJitLink) could not be loaded: {exc}", fix=LINK_FIX,
                           library="libnvJitLink.so") from exc
    return nvjitlink


def nvjitlink() -> ModuleType:
    """cuda.bindings.nvjitlink with its library loaded, as `Linker` and `LinkSession` use it, for code that drives
    nvJitLink itself; NotAvailable (saying what to install) where it cannot be loaded."""
    return _nvjitlink()


def nvjitlink_log(handle: Any, *, error: bool = False) -> str:
    """The info log (or with `error`, the error log) of an nvJitLink handle, "" when it has none or cannot be read:
    what `LinkSession` keeps as `info_log` / `error_log`."""
    return _log(_nvjitlink(), handle, error)


def link_backend() -> str:
    """The linker `Linker` uses by default: "nvjitlink" where cuda.bindings.nvjitlink loads, else "driver" (cuLink*)."""
    try:
        _nvjitlink()
    except NotAvailable:
        return "driver"
    return "nvjitlink"


def device_runtime_library() -> str:
    """The path of libcudadevrt.a (cuda.pathfinder, else $CUDA_HOME/lib64); NotAvailable if there is none."""
    searched: list[str] = []
    try:
        from cuda.pathfinder import find_static_lib

        return str(find_static_lib("cudadevrt"))
    except ImportError:
        searched.append("cuda.pathfinder (too old to find static libraries)")
    except Exception as exc:
        searched.append(f"cuda.pathfinder: {exc}")
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            candidate = os.path.join(root, "lib64", "libcudadevrt.a")
            searched.append(candidate)
            if os.path.isfile(candidate):
                return candidate
    raise NotAvailable(BACKEND, "the CUDA device runtime (libcudadevrt.a) was not found", fix=DEVRT_FIX,
                       library="libcudadevrt.a", searched=searched)


_KINDS = ("cubin", "ptx", "ltoir", "fatbin", "library")


class _Input:
    __slots__ = ("kind", "data", "name", "sm")

    def __init__(self, kind: str, data: bytes, name: str, sm: int | None):
        self.kind, self.data, self.name, self.sm = kind, data, name, sm


def _input(item: Any, index: int, op: str) -> _Input:
    if isinstance(item, ObjectCode):
        if item.kind not in _KINDS:
            raise invalid(op, f"input {index} is ObjectCode of unknown kind {item.kind!r}")
        if not isinstance(item.arch, str) or not isinstance(item.name_map, Mapping):
            raise invalid(op, f"input {index} is ObjectCode with arch {item.arch!r} and name_map of type "
                              f"{type(item.name_map).__name__}: arch must be a str ('sm_90') and name_map a mapping")
        check_image(item.code, op)
        sm = _arch_number(item.arch)
        return _Input(item.kind, item.code, f"input{index}.{item.kind}", sm)
    if isinstance(item, (bytes, bytearray, memoryview)):
        data = bytes(item)
        name = f"input{index}"
    elif isinstance(item, (str, os.PathLike)):
        path = Path(item)
        if not path.is_file():
            raise invalid(op, f"no such file to link: {path}")
        data = path.read_bytes()
        name = path.name
    else:
        raise invalid(op, f"input {index}: expected ObjectCode, bytes or a path, got {type(item).__name__}")
    if data[:8] == _AR_MAGIC:
        return _Input("library", data, name, None)
    kind = check_image(data, op)
    return _Input(kind, data, name, cubin_sm(data) if kind == "cubin" else None)


def _options(options: Any, op: str) -> tuple[str, ...]:
    """nvJitLink options as a tuple of str without NUL (the binding reads anything else as a pointer)."""
    try:
        opts = None if isinstance(options, (str, bytes)) else tuple(options)
    except TypeError:
        opts = None
    if opts is None or any(not isinstance(o, str) or "\0" in o for o in opts):
        raise invalid(op, f"options is a sequence of nvJitLink option strings, got {options!r}")
    return opts


def _arch_number(arch: str) -> int | None:
    digits = "".join(ch for ch in arch.split("_", 1)[-1] if ch.isdigit())
    return int(digits) if digits else None


class Linker:
    """Device code to link; `link()` runs nvJitLink (or hits the cache)."""

    def __init__(self, *inputs: Any, device_runtime: bool = False, options: Sequence[str] = (),
                 backend: str | None = None):
        op = "nvJitLinkAddData"
        if not inputs:
            raise invalid(op, "nothing to link")
        if backend not in (None, "nvjitlink", "driver"):
            raise invalid(op, f"backend must be None (nvJitLink where it loads, else the driver), 'nvjitlink' or "
                              f"'driver', got {backend!r}")
        self.backend = backend
        self.options = _options(options, op)
        self.inputs = tuple(_input(item, i, op) for i, item in enumerate(inputs))
        self.device_runtime = bool(device_runtime)
        names: dict[str, str] = {}
        for item in inputs:
            if isinstance(item, ObjectCode):
                names.update(item.name_map)
        self.name_map = MappingProxyType(names)

    @property
    def lto(self) -> bool:
        """Whether any input is LTO-IR, so the link runs link-time optimisation (and may target "ptx")."""
        return any(i.kind == "ltoir" for i in self.inputs)

    def link(self, target: str = "cubin", arch: Any = None) -> ObjectCode:
        """Link to "cubin" (default) or "ptx" (LTO only) for `arch` (default: the current device's)."""
        op = "nvJitLinkComplete"
        if target not in ("cubin", "ptx"):
            raise invalid(op, f"target must be 'cubin' or 'ptx', got {target!r}")
        if target == "ptx" and not self.lto:
            raise invalid(op, "PTX output needs link-time optimisation: link at least one LTO-IR input")
        arch_name = normalize_arch(arch, "cubin")
        out_arch = arch_name if target == "cubin" else arch_name.replace("sm_", "compute_")
        number = _arch_number(arch_name)
        for i, item in enumerate(self.inputs):
            if item.sm is not None and number is not None and item.sm != number:
                raise invalid(op, f"input {i} ({item.kind}) was made for sm_{item.sm}; this link is for {arch_name}: "
                                  f"all inputs must be of one architecture")
        nv: ModuleType | None = None
        if self.backend != "driver":
            try:
                nv = _nvjitlink()
            except NotAvailable as exc:
                if self.backend == "nvjitlink":
                    raise
                self._driver_can_link(target, exc.reason)
        else:
            self._driver_can_link(target, "backend='driver' was asked for")
        options = [f"-arch={arch_name}", *(["-lto"] if self.lto else []), *(["-ptx"] if target == "ptx" else []),
                   *self.options]
        if nv is None:
            _jit_options(options)  # an option cuLink has no equivalent for is refused before the cache is asked
        devrt = device_runtime_library() if self.device_runtime else None
        enabled = cache.cache_enabled()
        key = None
        if enabled:
            key = self._key(nv, options, target, devrt)
            hit = cache.memory_get(key)
            if hit is not None:
                return hit.replace(cache="memory")
            entry = cache.disk_get(key)
            if entry is not None:
                meta, payload = entry
                code = ObjectCode(payload, target, out_arch, self.name_map, str(meta.get("log", "")), cache="disk")
                cache.memory_put(key, code.replace(cache=None))
                return code
        payload, log = self._run(nv, options, target, devrt)
        code = ObjectCode(payload, target, out_arch, self.name_map, log, cache=None)
        if key is not None:
            cache.memory_put(key, code)
            cache.disk_put(key, {"kind": target, "arch": code.arch, "names": dict(self.name_map), "log": log}, payload)
        return code

    def _driver_can_link(self, target: str, why: str) -> None:
        """NotAvailable unless the driver's cuLink* can make this link (no LTO-IR input, CUBIN output)."""
        if self.lto or target == "ptx":
            what = "LTO-IR inputs" if self.lto else "PTX output"
            raise NotAvailable(BACKEND, f"{what} need nvJitLink; the driver's cuLink* links CUBIN, PTX, fatbin and "
                                        f"libraries only (nvJitLink unused: {why})", fix=LINK_FIX,
                               library="libnvJitLink.so")

    def _key(self, nv: ModuleType | None, options: list[str], target: str, devrt: str | None) -> str:
        digests = [[i.kind, cache.sha256(i.data).hexdigest()] for i in self.inputs]
        if devrt is not None:
            st = os.stat(devrt)
            digests.append(["devrt", f"{devrt}|{st.st_size}|{st.st_mtime_ns}"])
        if nv is None:  # cuLink: the driver is the linker
            return cache.cache_key(link=digests, options=options, target=target, culink=int(call("cuDriverGetVersion")),
                                   libcuda_file=_library_identity("libcuda.so"))
        return cache.cache_key(link=digests, options=options, target=target, nvjitlink=list(nv.version()),
                               nvjitlink_file=_nvjitlink_identity())

    def _run(self, nv: ModuleType | None, options: list[str], target: str, devrt: str | None) -> tuple[bytes, str]:
        session: LinkSession | DriverLinkSession
        session = LinkSession(options, nv) if nv is not None else DriverLinkSession(options)
        try:
            for item in self.inputs:
                session.add(item.kind, item.data, item.name)
            if devrt is not None:
                session.add_file("library", devrt)
            payload = session.complete(target)
            return payload, session.info_log
        finally:
            session.close()


class LinkSession:
    """One nvJitLink handle: made with its options, given inputs, completed once; its logs outlive it.

    `Linker` runs one per link; the cuda.core compat keeps one per cuda.core Linker,
    whose handle and logs it shows.
    """

    def __init__(self, options: Sequence[str], nv: ModuleType | None = None):
        self.nv = nv = _nvjitlink() if nv is None else nv
        self.error_log = ""
        self.info_log = ""
        self.handle: Any = None
        opts = list(_options(options, "nvJitLinkCreate"))
        try:
            self.handle = nv.create(len(opts), opts)
        except nv.nvJitLinkError as exc:
            raise CompileError(BACKEND, "nvJitLinkCreate", f"bad options {opts}: {exc}", getattr(exc, "status", None),
                               str(exc)) from None

    def _kind(self, kind: str, op: str) -> Any:
        types = self.nv.InputType
        kinds = {"cubin": types.CUBIN, "ptx": types.PTX, "ltoir": types.LTOIR, "fatbin": types.FATBIN,
                 "object": types.OBJECT, "library": types.LIBRARY}
        if not isinstance(kind, str) or kind not in kinds:
            raise invalid(op, f"cannot link input of kind {kind!r} (kinds: {sorted(kinds)})")
        return kinds[kind]

    def _fail(self, step: str, exc: Any) -> CompileError:
        self.error_log = _log(self.nv, self.handle, error=True)
        self.info_log = _log(self.nv, self.handle, error=False)
        return CompileError(BACKEND, step, self.error_log or str(exc), getattr(exc, "status", None), str(exc))

    def _live(self, op: str) -> Any:
        if self.handle is None:
            raise closed(op, "nvJitLink handle")
        return self.handle

    def add(self, kind: str, data: bytes, name: str) -> None:
        """Add one input (nvJitLinkAddData); PTX is given its terminating NUL."""
        op = "nvJitLinkAddData"
        handle = self._live(op)
        code = self._kind(kind, op)
        if not isinstance(data, (bytes, bytearray)):
            raise invalid(op, f"data must be bytes, got {type(data).__name__}")
        if not isinstance(name, str):
            raise invalid(op, f"name must be a str, got {type(name).__name__}")
        if kind == "ptx" and not data.endswith(b"\0"):
            data = data + b"\0"  # a new object: += would grow the caller's bytearray
        try:
            self.nv.add_data(handle, code, data, len(data), name)
        except self.nv.nvJitLinkError as exc:
            raise self._fail("nvJitLinkAddData", exc) from None

    def add_file(self, kind: str, path: str) -> None:
        """Add one input file (nvJitLinkAddFile)."""
        op = "nvJitLinkAddFile"
        handle = self._live(op)
        code = self._kind(kind, op)
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if not isinstance(path, str) or not path or "\0" in path:
            raise invalid(op, f"path must be a file path (str), got {path!r}")
        try:
            self.nv.add_file(handle, code, path)
        except self.nv.nvJitLinkError as exc:
            raise self._fail("nvJitLinkAddFile", exc) from None

    def complete(self, target: str) -> bytes:
        """Link (nvJitLinkComplete) and return the linked "cubin" or "ptx"; the logs are kept."""
        nv = self.nv
        handle = self._live("nvJitLinkComplete")
        step = "nvJitLinkComplete"
        try:
            nv.complete(handle)
            step = "nvJitLinkGetLinkedCubin" if target == "cubin" else "nvJitLinkGetLinkedPtx"
            if target == "cubin":
                out = bytearray(nv.get_linked_cubin_size(handle))
                nv.get_linked_cubin(handle, out)
            else:
                out = bytearray(nv.get_linked_ptx_size(handle))
                nv.get_linked_ptx(handle, out)
        except nv.nvJitLinkError as exc:
            raise self._fail(step, exc) from None
        self.info_log = _log(nv, handle, error=False)
        self.error_log = _log(nv, handle, error=True)
        return bytes(out)

    def close(self) -> None:
        """Destroy the handle (nvJitLinkDestroy); the logs stay.  Idempotent."""
        handle, self.handle = self.handle, None
        if handle is not None:
            self.nv.destroy(handle)


def _log(nv: ModuleType, handle: Any, error: bool) -> str:
    try:
        size = nv.get_error_log_size(handle) if error else nv.get_info_log_size(handle)
        if size <= 1:
            return ""
        buf = bytearray(size)
        (nv.get_error_log if error else nv.get_info_log)(handle, buf)
        return bytes(buf).rstrip(b"\0").decode(errors="replace").strip()
    except Exception:
        return ""


def _nvjitlink_identity() -> str:
    """The loaded libnvJitLink file (path, size, mtime), from /proc/self/maps; "unidentified" elsewhere."""
    return _library_identity("libnvJitLink.so")


def _library_identity(name: str) -> str:
    """The loaded library `name` (path, size, mtime), from /proc/self/maps; "unidentified" elsewhere."""
    from ironaccel.probing import loaded_library

    path = loaded_library(name)
    if path is not None:
        try:
            real = os.path.realpath(path)
            st = os.stat(real)
            return f"{real}|{st.st_size}|{st.st_mtime_ns}"
        except OSError:
            pass
    return "unidentified"


# -- the driver's JIT linker (cuLink*) ----------------------------------------------------------------------------

_LOG_BYTES = 1 << 16  # each of the info and error logs cuLink writes
_JIT_FLAGS = {"-g": "CU_JIT_GENERATE_DEBUG_INFO", "-lineinfo": "CU_JIT_GENERATE_LINE_INFO",
              "-verbose": "CU_JIT_LOG_VERBOSE"}
_JIT_KINDS = {"cubin": "CU_JIT_INPUT_CUBIN", "ptx": "CU_JIT_INPUT_PTX", "fatbin": "CU_JIT_INPUT_FATBINARY",
              "object": "CU_JIT_INPUT_OBJECT", "library": "CU_JIT_INPUT_LIBRARY"}


def _jit_options(options: Sequence[str]) -> list[tuple[str, Any]]:
    """[(CUjit_option name, value)] for nvJitLink-style option strings; InvalidArgument naming cuLinkCreate for one
    cuLink has no equivalent of ("-lto" and "-ptx" are refused earlier, with NotAvailable)."""
    op = "cuLinkCreate"
    out: list[tuple[str, Any]] = []
    for opt in _options(options, op):
        m = re.fullmatch(r"-arch=sm_(\d+[af]?)", opt)
        if m:
            out.append(("CU_JIT_TARGET", m.group(1).upper()))  # CU_TARGET_COMPUTE_90, ..._90A
            continue
        m = re.fullmatch(r"-O(\d)", opt)
        if m:
            out.append(("CU_JIT_OPTIMIZATION_LEVEL", int(m.group(1))))
            continue
        m = re.fullmatch(r"-maxrregcount=(\d+)", opt)
        if m:
            out.append(("CU_JIT_MAX_REGISTERS", int(m.group(1))))
            continue
        if opt in _JIT_FLAGS:
            out.append((_JIT_FLAGS[opt], 1))
            continue
        if opt in ("-lto", "-ptx"):
            raise NotAvailable(BACKEND, f"{opt} needs nvJitLink: the driver's cuLink* has no such option", fix=LINK_FIX,
                               library="libnvJitLink.so")
        raise invalid(op, f"option {opt!r} has no cuLink equivalent (the driver linker takes -arch=sm_NN, -O<n>, "
                          f"-maxrregcount=N, -g, -lineinfo and -verbose)")
    return out


class DriverLinkSession:
    """One link through the driver's JIT linker (a CUlinkState): `LinkSession`'s methods and logs, over cuLink*.

    Options are nvJitLink-style strings mapped to CUjit options (`-arch=sm_NN`, `-O<n>`, `-maxrregcount=N`, `-g`,
    `-lineinfo`, `-verbose`); inputs are CUBIN, PTX, fatbin, object or library.  The driver links in a context:
    the calling thread's current one, else device 0's primary context, made current around each call.
    """

    def __init__(self, options: Sequence[str]):
        self._drv = driver()
        self.error_log = ""
        self.info_log = ""
        self.handle: Any = None
        self._primary: Any = None
        jit = _jit_options(options)
        err, ctx = try_call("cuCtxGetCurrent")
        if err or ctx is None or not int(ctx):
            cudev = call("cuDeviceGet", 0)
            self._primary = (cudev, call("cuDevicePrimaryCtxRetain", cudev))
        self._info, self._error = bytearray(_LOG_BYTES), bytearray(_LOG_BYTES)  # the driver writes into these
        names = ["CU_JIT_INFO_LOG_BUFFER", "CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES", "CU_JIT_ERROR_LOG_BUFFER",
                 "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES"]
        values: list[Any] = [self._info, _LOG_BYTES, self._error, _LOG_BYTES]
        for name, value in jit:
            names.append(name)
            if name == "CU_JIT_TARGET":
                target = getattr(self._drv.CUjit_target, f"CU_TARGET_COMPUTE_{value}", None)
                if target is None:
                    self._release()
                    raise invalid("cuLinkCreate", f"cuda.bindings has no JIT target for sm_{value.lower()}")
                value = target
            values.append(value)
        keys = [getattr(self._drv.CUjit_option, n) for n in names]
        self._values = values  # the log buffers must outlive the CUlinkState
        op = "cuLinkCreate"
        with self._context():
            err, state = try_call(op, len(keys), keys, values)
        if err:
            self._release()
            raise self._fail(op, err)
        self.handle = state

    @contextmanager
    def _context(self) -> Iterator[None]:
        if self._primary is None:
            yield
            return
        call("cuCtxPushCurrent", self._primary[1])
        try:
            yield
        finally:
            call("cuCtxPopCurrent")

    def _logs(self) -> None:
        self.info_log = bytes(self._info).split(b"\0", 1)[0].decode(errors="replace").strip()
        self.error_log = bytes(self._error).split(b"\0", 1)[0].decode(errors="replace").strip()

    def _fail(self, op: str, err: int) -> CompileError:
        self._logs()
        text = self.error_log or f"{op} failed"
        return CompileError(BACKEND, op, text, err, code_name(err))

    def _live(self, op: str) -> Any:
        if self.handle is None:
            raise closed(op, "cuLink state")
        return self.handle

    def add(self, kind: str, data: bytes, name: str) -> None:
        """Add one input (cuLinkAddData); PTX is given its terminating NUL."""
        op = "cuLinkAddData"
        state = self._live(op)
        code = self._kind(kind, op)
        if not isinstance(data, (bytes, bytearray)):
            raise invalid(op, f"data must be bytes, got {type(data).__name__}")
        if not isinstance(name, str) or "\0" in name:
            raise invalid(op, f"name must be a str without NUL, got {name!r}")
        if kind == "ptx" and not data.endswith(b"\0"):
            data = data + b"\0"
        data = bytes(data)
        with self._context():
            err, _ = try_call(op, state, code, data, len(data), name.encode(), 0, None, None)
        if err:
            raise self._fail(op, err)

    def add_file(self, kind: str, path: str) -> None:
        """Add one input file (cuLinkAddFile)."""
        op = "cuLinkAddFile"
        state = self._live(op)
        code = self._kind(kind, op)
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if not isinstance(path, str) or not path or "\0" in path:
            raise invalid(op, f"path must be a file path (str), got {path!r}")
        with self._context():
            err, _ = try_call(op, state, code, os.fsencode(path), 0, None, None)
        if err:
            raise self._fail(op, err)

    def _kind(self, kind: str, op: str) -> Any:
        if kind == "ltoir":
            raise NotAvailable(BACKEND, "LTO-IR inputs need nvJitLink; the driver's cuLink* links CUBIN, PTX, fatbin "
                                        "and libraries only", fix=LINK_FIX, library="libnvJitLink.so")
        if not isinstance(kind, str) or kind not in _JIT_KINDS:
            raise invalid(op, f"cannot link input of kind {kind!r} (kinds: {sorted(_JIT_KINDS)})")
        return getattr(self._drv.CUjitInputType, _JIT_KINDS[kind])

    def complete(self, target: str = "cubin") -> bytes:
        """Link (cuLinkComplete) and return the linked CUBIN (the driver makes no PTX); the logs are kept."""
        op = "cuLinkComplete"
        state = self._live(op)
        if target != "cubin":
            raise NotAvailable(BACKEND, f"{target!r} output needs nvJitLink: the driver's cuLink* makes CUBIN only",
                               fix=LINK_FIX, library="libnvJitLink.so")
        with self._context():
            err, out = try_call(op, state)
        if err:
            raise self._fail(op, err)
        pointer, size = out
        payload = ctypes.string_at(int(pointer), int(size))  # the driver's buffer dies with the CUlinkState
        self._logs()
        return payload

    def _release(self) -> None:
        primary, self._primary = self._primary, None
        if primary is not None:
            try_call("cuDevicePrimaryCtxRelease", primary[0])

    def close(self) -> None:
        """Destroy the CUlinkState (cuLinkDestroy); the logs stay.  Idempotent."""
        state, self.handle = self.handle, None
        if state is not None:
            with self._context():
                try_call("cuLinkDestroy", state)
        self._release()
