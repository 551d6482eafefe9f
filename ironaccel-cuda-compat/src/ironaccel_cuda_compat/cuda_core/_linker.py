"""cuda.core's `Linker` and `LinkerOptions` on ironaccel's nvJitLink session (`linker.LinkSession`).

As in cuda.core, a Linker makes its nvJitLink handle and adds every input when it
is constructed (bad options raise the binding's `nvJitLinkError` there), links in
`link()`, and keeps the error and info logs after a failed link and after
`close()`.  The driver's cuLink* backend (cuda.core's fallback when nvJitLink is
missing) is not in ironaccel: there the Linker raises `NotAvailable` saying how to
get nvJitLink; `LinkerOptions._prepare_driver_options` still writes the driver's
options as cuda.core does.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any

from ._module import ObjectCode
from ._utils.cuda_utils import check_or_create_options, is_sequence

__all__ = ["Linker", "LinkerOptions"]

_driver: Any = None  # cuda.bindings.driver once the driver backend is chosen (cuda.core's module attribute)
_use_nvjitlink_backend: bool | None = None  # memo of the backend decision
_LOG_BUFFER_BYTES = 4194304


def _nvjitlink_has_version_symbol(nvjitlink: Any) -> bool:
    try:
        nvjitlink.version()
    except Exception:
        return False
    return True


def _decide_nvjitlink_or_driver() -> bool:
    """True when linking would use the driver (cuLink*), False when nvJitLink is usable (as cuda.core decides)."""
    try:
        from cuda.bindings import nvjitlink
    except ImportError:
        return True
    return not _nvjitlink_has_version_symbol(nvjitlink)


def _use_nvjitlink() -> bool:
    global _use_nvjitlink_backend, _driver
    if _use_nvjitlink_backend is None:
        _use_nvjitlink_backend = not _decide_nvjitlink_or_driver()
        if not _use_nvjitlink_backend and _driver is None:
            from cuda.bindings import driver

            _driver = driver
    return _use_nvjitlink_backend


def _bool(value: Any) -> str:
    return "true" if value else "false"


def _each(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [value]
    if is_sequence(value):
        return list(value)
    return []


def _nvjitlink_error(exc: Any) -> Exception:
    """cuda.bindings' nvJitLinkError of a failed nvJitLink step (what cuda.core raises), also a CUDAError naming the
    step; its log: get_error_log()."""
    from cuda.bindings.nvjitlink import nvJitLinkError

    from ._utils.cuda_utils import binding_error

    return binding_error(nvJitLinkError, exc.code if exc.code is not None else 0, exc.op or "nvJitLink")


@dataclass
class LinkerOptions:
    """Options of a link (nvJitLink option strings; the driver's CUjit options for the cuLink backend)."""

    name: str | None = "<default linker>"
    arch: str | None = None
    max_register_count: int | None = None
    time: bool | None = None
    verbose: bool | None = None
    link_time_optimization: bool | None = None
    ptx: bool | None = None
    optimization_level: int | None = None
    debug: bool | None = None
    lineinfo: bool | None = None
    ftz: bool | None = None
    prec_div: bool | None = None
    prec_sqrt: bool | None = None
    fma: bool | None = None
    kernels_used: Any = None
    variables_used: Any = None
    optimize_unused_variables: bool | None = None
    ptxas_options: Any = None
    split_compile: int | None = None
    split_compile_extended: int | None = None
    no_cache: bool | None = None
    numba_debug: bool | None = None

    def __post_init__(self) -> None:
        if self.name is None:
            self.name = "<default linker>"

    def _arch(self) -> str:
        if self.arch is not None:
            return self.arch
        from ._device import Device

        return "sm_" + "".join(str(i) for i in Device().compute_capability)

    def _prepare_nvjitlink_options(self, as_bytes: bool = True) -> list[Any]:
        """The nvJitLink option strings of these options (bytes, or str with `as_bytes=False`)."""
        options = [f"-arch={self._arch()}"]
        if self.max_register_count is not None:
            options.append(f"-maxrregcount={self.max_register_count}")
        if self.time is not None:
            options.append("-time")
        if self.verbose:
            options.append("-verbose")
        if self.link_time_optimization:
            options.append("-lto")
        if self.ptx:
            options.append("-ptx")
        if self.optimization_level is not None:
            options.append(f"-O{self.optimization_level}")
        if self.debug:
            options.append("-g")
        if self.lineinfo:
            options.append("-lineinfo")
        for name, flag in (("ftz", "-ftz"), ("prec_div", "-prec-div"), ("prec_sqrt", "-prec-sqrt"), ("fma", "-fma")):
            value = getattr(self, name)
            if value is not None:
                options.append(f"{flag}={_bool(value)}")
        options.extend(f"-kernels-used={k}" for k in _each(self.kernels_used))
        options.extend(f"-variables-used={v}" for v in _each(self.variables_used))
        if self.optimize_unused_variables is not None:
            options.append("-optimize-unused-variables")
        options.extend(f"-Xptxas={o}" for o in _each(self.ptxas_options))
        if self.split_compile is not None:
            options.append(f"-split-compile={self.split_compile}")
        if self.split_compile_extended is not None:
            options.append(f"-split-compile-extended={self.split_compile_extended}")
        if self.no_cache is True:
            options.append("-no-cache")
        return [o.encode() for o in options] if as_bytes else options

    def _prepare_driver_options(self) -> tuple[list[Any], list[Any]]:
        """(values, CUjit_option keys) for cuLinkCreate, led by the info and error log buffers."""
        drv: Any = _driver
        if drv is None:
            from cuda.bindings import driver

            drv = driver
        jit = drv.CUjit_option
        size = _LOG_BUFFER_BYTES
        values: list[Any] = [bytearray(size), size, bytearray(size), size]
        keys: list[Any] = [jit.CU_JIT_INFO_LOG_BUFFER, jit.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                           jit.CU_JIT_ERROR_LOG_BUFFER, jit.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]

        def put(key: Any, value: Any) -> None:
            keys.append(key)
            values.append(value)

        if self.arch is not None:
            arch = self.arch.split("_")[-1].upper()
            put(jit.CU_JIT_TARGET, getattr(drv.CUjit_target, f"CU_TARGET_COMPUTE_{arch}"))
        if self.max_register_count is not None:
            put(jit.CU_JIT_MAX_REGISTERS, self.max_register_count)
        if self.time is not None:
            raise ValueError("time option is not supported by the driver API")
        if self.verbose:
            put(jit.CU_JIT_LOG_VERBOSE, 1)
        if self.link_time_optimization:
            put(jit.CU_JIT_LTO, 1)
        if self.ptx:
            raise ValueError("ptx option is not supported by the driver API")
        if self.optimization_level is not None:
            put(jit.CU_JIT_OPTIMIZATION_LEVEL, self.optimization_level)
        if self.debug:
            put(jit.CU_JIT_GENERATE_DEBUG_INFO, 1)
        if self.lineinfo:
            put(jit.CU_JIT_GENERATE_LINE_INFO, 1)
        for name, message in (("ftz", "ftz option is deprecated"), ("prec_div", "prec_div option is deprecated"),
                              ("prec_sqrt", "prec_sqrt option is deprecated"), ("fma", "fma options is deprecated"),
                              ("kernels_used", "kernels_used is deprecated"),
                              ("variables_used", "variables_used is deprecated"),
                              ("optimize_unused_variables", "optimize_unused_variables is deprecated")):
            if getattr(self, name) is not None:
                warnings.warn(f"{message} in the driver API", DeprecationWarning, stacklevel=3)
        for name in ("ptxas_options", "split_compile", "split_compile_extended"):
            if getattr(self, name) is not None:
                raise ValueError(f"{name} option is not supported by the driver API")
        if self.no_cache is True:
            put(jit.CU_JIT_CACHE_MODE, drv.CUjit_cacheMode.CU_JIT_CACHE_OPTION_NONE)
        return values, keys

    def as_bytes(self, backend: str = "nvjitlink") -> list[bytes]:
        """The nvJitLink option strings as bytes (the only backend with option strings)."""
        backend = str(backend).lower()
        if backend != "nvjitlink":
            raise ValueError(f"as_bytes() only supports 'nvjitlink' backend, got '{backend}'")
        if not _use_nvjitlink():
            raise RuntimeError("nvJitLink backend is not available")
        return self._prepare_nvjitlink_options(as_bytes=True)


class Linker:
    """Links ObjectCode (CUBIN, PTX, LTO-IR, fatbin, objects, libraries) into a CUBIN or PTX with nvJitLink."""

    __slots__ = ("_options", "_session", "_sym_map", "_linked", "__weakref__")

    def __init__(self, *object_codes: ObjectCode, options: Any = None) -> None:
        from ironaccel_cuda.errors import CompileError
        from ironaccel_cuda.linker import LinkSession

        self._session: Any = None
        if len(object_codes) == 0:
            raise ValueError("At least one ObjectCode object must be provided")
        for code in object_codes:
            if not isinstance(code, ObjectCode):
                raise TypeError(f"Linker inputs must be ObjectCode, got {type(code).__name__}")
        self._options = options = check_or_create_options(LinkerOptions, options, "Linker options")
        self._linked: dict[str, ObjectCode] = {}
        self._sym_map: dict[str, Any] = {}
        _use_nvjitlink()  # without nvJitLink, LinkSession raises NotAvailable: ironaccel has no cuLink backend
        try:
            self._session = LinkSession(options._prepare_nvjitlink_options(as_bytes=False))
            for i, code in enumerate(object_codes):
                self._sym_map.update(code._sym_map)
                kind = code.code_type
                if isinstance(code.code, str):
                    self._session.add_file(kind, os.fspath(code.code))
                else:
                    self._session.add(kind, bytes(code.code), code.name or f"{kind}{i}")
        except CompileError as exc:
            raise _nvjitlink_error(exc) from None

    def link(self, target_type: str) -> ObjectCode:
        """The linked code, "cubin" or "ptx" (PTX needs link-time optimisation with nvJitLink)."""
        from ironaccel_cuda.errors import CompileError

        if target_type not in ("cubin", "ptx"):
            raise ValueError(f"Unsupported target type: {target_type}")
        done = self._linked.get(target_type)
        if done is not None:
            return done
        session = self._live()
        try:
            payload = session.complete(target_type)
        except CompileError as exc:
            raise _nvjitlink_error(exc) from None
        code = ObjectCode._init(payload, target_type, name=self._options.name or "", symbol_mapping=self._sym_map)
        self._linked[target_type] = code
        return code

    def _live(self) -> Any:
        from ._utils.cuda_utils import CUDAError

        if self._session is None or self._session.handle is None:
            raise CUDAError("this Linker is closed")
        return self._session

    def get_error_log(self) -> str:
        """nvJitLink's error log of the link (kept after close)."""
        return "" if self._session is None else self._session.error_log

    def get_info_log(self) -> str:
        """nvJitLink's info log of the link (kept after close)."""
        return "" if self._session is None else self._session.info_log

    @property
    def handle(self) -> int:
        """The nvJitLinkHandle (an address)."""
        return int(self._live().handle)

    @classmethod
    def which_backend(cls) -> str:
        """"nvJitLink", or "driver" where nvJitLink cannot be loaded."""
        return "nvJitLink" if _use_nvjitlink() else "driver"

    def close(self) -> None:
        """Destroy the nvJitLink handle; the logs stay.  Idempotent."""
        if self._session is not None:
            self._session.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<Linker name={self._options.name!r}>" if hasattr(self, "_options") else "<Linker>"
