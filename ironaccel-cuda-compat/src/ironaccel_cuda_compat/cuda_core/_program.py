"""cuda.core's `Program` and `ProgramOptions` on ironaccel's NVRTC `Program` and nvJitLink session.

C++ programs compile through ironaccel_cuda's `Program` (NVRTC, with its memory and
disk caches), to PTX, CUBIN or LTO-IR: `ProgramOptions` become NVRTC option strings
exactly as cuda.core writes them.  PTX programs are linked to CUBIN by the compat's
`Linker` (ironaccel's nvJitLink session), made when the Program is, as in cuda.core;
NVVM IR compiles with libNVVM through cuda.bindings.nvvm (ironaccel has no NVVM
compiler of its own).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any

from . import _ia
from ._module import ObjectCode
from ._utils.cuda_utils import (
    CUDAError,
    NVRTCError,
    _handle_boolean_option,
    binding_error,
    check_or_create_options,
    is_nested_sequence,
    is_sequence,
)
from ._utils.version import driver_version
from .typing import CompilerBackendType

__all__ = ["Program", "ProgramOptions"]

_SUPPORTED_CODE_TYPES = ("c++", "ptx", "nvvm")
_NVRTC_TARGETS = ("ptx", "cubin", "ltoir")
_MACRO_TYPE = "Union[str, tuple[str, str]]"


@dataclass
class ProgramOptions:
    """Compiler options of a Program; `as_bytes("nvrtc")` / `as_bytes("nvvm")` give the option strings."""

    name: str | None = "default_program"
    arch: str | None = None
    relocatable_device_code: bool | None = None
    extensible_whole_program: bool | None = None
    debug: bool | None = None
    lineinfo: bool | None = None
    device_code_optimize: bool | None = None
    ptxas_options: Any = None
    max_register_count: int | None = None
    ftz: bool | None = None
    prec_sqrt: bool | None = None
    prec_div: bool | None = None
    fma: bool | None = None
    use_fast_math: bool | None = None
    extra_device_vectorization: bool | None = None
    link_time_optimization: bool | None = None
    gen_opt_lto: bool | None = None
    define_macro: Any = None
    undefine_macro: Any = None
    include_path: Any = None
    use_bundled_headers: bool | None = None
    pre_include: Any = None
    no_source_include: bool | None = None
    std: str | None = None
    builtin_move_forward: bool | None = None
    builtin_initializer_list: bool | None = None
    disable_warnings: bool | None = None
    restrict: bool | None = None
    device_as_default_execution_space: bool | None = None
    device_int128: bool | None = None
    optimization_info: str | None = None
    no_display_error_number: bool | None = None
    diag_error: Any = None
    diag_suppress: Any = None
    diag_warn: Any = None
    brief_diagnostics: bool | None = None
    time: str | None = None
    split_compile: int | None = None
    fdevice_syntax_only: bool | None = None
    minimal: bool | None = None
    no_cache: bool | None = None
    fdevice_time_trace: str | None = None
    device_float128: bool | None = None
    frandom_seed: str | None = None
    ofast_compile: str | None = None
    pch: bool | None = None
    create_pch: str | None = None
    use_pch: str | None = None
    pch_dir: str | None = None
    pch_verbose: bool | None = None
    pch_messages: bool | None = None
    instantiate_templates_in_pch: bool | None = None
    extra_sources: Any = None
    use_libdevice: bool | None = None
    numba_debug: bool | None = None

    def __post_init__(self) -> None:
        if self.name is None:
            self.name = "default_program"
        if self.arch is None:
            from ._device import Device

            self.arch = f"sm_{Device().arch}"
        if self.extra_sources is not None:
            _check_extra_sources(self.extra_sources)

    def _prepare_nvrtc_options(self) -> list[bytes]:
        return [o.encode() for o in _nvrtc_options(self)]

    def _prepare_nvvm_options(self, as_bytes: bool = True) -> list[Any]:
        options = _nvvm_options(self)
        return [o.encode() for o in options] if as_bytes else options

    def as_bytes(self, backend: Any, target_type: Any = None) -> list[bytes]:
        """The option strings for `backend` ("nvrtc" or "nvvm"), as bytes."""
        backend = str(backend).lower()
        if backend == "nvrtc":
            return self._prepare_nvrtc_options()
        if backend == "nvvm":
            options = self._prepare_nvvm_options(as_bytes=True)
            if target_type == "ltoir" and b"-gen-lto" not in options:
                options.append(b"-gen-lto")
            return options
        raise ValueError(f"Unknown backend '{backend}'. Must be one of: 'nvrtc', 'nvvm'")

    def __repr__(self) -> str:
        return f"ProgramOptions(name={self.name!r}, arch={self.arch!r})"

    def _prepare_extra_sources_bytes(self) -> list[tuple[bytes, bytes]] | None:
        if self.extra_sources is None:
            return None
        out = []
        for name, source in self.extra_sources:
            data = source.encode("utf-8") if isinstance(source, str) else bytes(source)
            out.append((name.encode("utf-8"), data))
        return out


def _check_extra_sources(sources: Any) -> None:
    if not is_sequence(sources) or isinstance(sources, (str, bytes)):
        raise TypeError("extra_sources must be a sequence of 2-tuples: ((name1, source1), (name2, source2), ...)")
    for i, module in enumerate(sources):
        if not isinstance(module, tuple) or len(module) != 2:
            raise TypeError(f"Each extra module must be a 2-tuple (name, source), got {type(module).__name__} at "
                            f"index {i}")
        name, source = module
        if not isinstance(name, str):
            raise TypeError(f"Module name at index {i} must be a string, got {type(name).__name__}")
        if not isinstance(source, (str, bytes, bytearray)):
            raise TypeError(f"Module source at index {i} must be str (textual LLVM IR), bytes (textual LLVM IR or "
                            f"bitcode), or bytearray, got {type(source).__name__}")
        if len(source) == 0:
            raise ValueError(f"Module source for '{name}' (index {i}) cannot be empty")


# NVRTC option spellings: flags present when true, booleans written "=true"/"=false",
# values written "=value", lists repeated once per item.
_NVRTC_FLAGS = (
    ("extensible_whole_program", "--extensible-whole-program"), ("debug", "--device-debug"),
    ("lineinfo", "--generate-line-info"), ("device_code_optimize", "--dopt=on"), ("use_fast_math", "--use_fast_math"),
    ("extra_device_vectorization", "--extra-device-vectorization"), ("link_time_optimization", "--dlink-time-opt"),
    ("gen_opt_lto", "--gen-opt-lto"),
)
_NVRTC_BOOLEANS_EARLY = (("ftz", "--ftz"), ("prec_sqrt", "--prec-sqrt"), ("prec_div", "--prec-div"),
                         ("fma", "--fmad"))
_NVRTC_LATE = (
    ("no_source_include", "flag", "--no-source-include"), ("std", "value", "--std"),
    ("builtin_move_forward", "bool", "--builtin-move-forward"),
    ("builtin_initializer_list", "bool", "--builtin-initializer-list"),
    ("disable_warnings", "flag", "--disable-warnings"), ("restrict", "flag", "--restrict"),
    ("device_as_default_execution_space", "flag", "--device-as-default-execution-space"),
    ("device_int128", "flag", "--device-int128"), ("device_float128", "flag", "--device-float128"),
    ("optimization_info", "value", "--optimization-info"),
    ("no_display_error_number", "flag", "--no-display-error-number"),
    ("diag_error", "ints", "--diag-error"), ("diag_suppress", "ints", "--diag-suppress"),
    ("diag_warn", "ints", "--diag-warn"), ("brief_diagnostics", "bool", "--brief-diagnostics"),
    ("time", "value", "--time"), ("split_compile", "value", "--split-compile"),
    ("fdevice_syntax_only", "flag", "--fdevice-syntax-only"), ("minimal", "flag", "--minimal"),
    ("no_cache", "flag", "--no-cache"), ("fdevice_time_trace", "value", "--fdevice-time-trace"),
    ("frandom_seed", "value", "--frandom-seed"), ("ofast_compile", "value", "--Ofast-compile"),
    ("pch", "flag", "--pch"), ("create_pch", "value", "--create-pch"), ("use_pch", "value", "--use-pch"),
    ("pch_dir", "value", "--pch-dir"), ("pch_verbose", "bool", "--pch-verbose"),
    ("pch_messages", "bool", "--pch-messages"),
    ("instantiate_templates_in_pch", "bool", "--instantiate-templates-in-pch"),
)


def _repeat(options: list[str], flag: str, value: Any, scalar: type | tuple[type, ...]) -> None:
    if isinstance(value, scalar):
        options.append(f"{flag}={value}")
    elif is_sequence(value):
        options.extend(f"{flag}={item}" for item in value)


def _define(options: list[str], macro: Any) -> bool:
    if isinstance(macro, str):
        options.append(f"--define-macro={macro}")
        return True
    if isinstance(macro, tuple):
        if len(macro) != 2 or any(not isinstance(m, str) for m in macro):
            raise RuntimeError(f"Expected define_macro tuple[str, str], got {macro}")
        options.append(f"--define-macro={macro[0]}={macro[1]}")
        return True
    return False


def _nvrtc_options(o: ProgramOptions) -> list[str]:
    options = [f"-arch={o.arch}"]
    if o.relocatable_device_code is not None:
        options.append(f"--relocatable-device-code={_handle_boolean_option(o.relocatable_device_code)}")
    for name, flag in _NVRTC_FLAGS[:4]:
        if getattr(o, name):
            options.append(flag)
    if o.ptxas_options is not None:
        _repeat(options, "--ptxas-options", o.ptxas_options, str)
    if o.max_register_count is not None:
        options.append(f"--maxrregcount={o.max_register_count}")
    for name, flag in _NVRTC_BOOLEANS_EARLY:
        value = getattr(o, name)
        if value is not None:
            options.append(f"{flag}={_handle_boolean_option(value)}")
    for name, flag in _NVRTC_FLAGS[4:]:
        if getattr(o, name):
            options.append(flag)
    if o.define_macro is not None:
        if not _define(options, o.define_macro):
            if not is_nested_sequence(o.define_macro) and not is_sequence(o.define_macro):
                raise RuntimeError(f"Expected define_macro {_MACRO_TYPE}, list[{_MACRO_TYPE}], got {o.define_macro}")
            for macro in o.define_macro:
                if not _define(options, macro):
                    raise RuntimeError(f"Expected define_macro {_MACRO_TYPE}, got {macro}")
    for name, flag in (("undefine_macro", "--undefine-macro"), ("include_path", "--include-path"),
                       ("pre_include", "--pre-include")):
        value = getattr(o, name)
        if value is not None:
            _repeat(options, flag, value, str)
    for name, kind, flag in _NVRTC_LATE:
        value = getattr(o, name)
        if value is None:
            continue
        if kind == "flag":
            if value:
                options.append(flag)
        elif kind == "bool":
            options.append(f"{flag}={_handle_boolean_option(value)}")
        elif kind == "ints":
            _repeat(options, flag, value, int)
        else:
            options.append(f"{flag}={value}")
    if o.numba_debug:
        options.append("--numba-debug")
    return options


_NVVM_UNSUPPORTED_SET = ("relocatable_device_code", "ptxas_options", "max_register_count", "define_macro",
                         "undefine_macro", "include_path", "pre_include", "std", "builtin_move_forward",
                         "builtin_initializer_list", "optimization_info", "diag_error", "diag_suppress", "diag_warn",
                         "brief_diagnostics", "time", "split_compile")
_NVVM_UNSUPPORTED_TRUE = ("extensible_whole_program", "lineinfo", "use_fast_math", "extra_device_vectorization",
                          "gen_opt_lto", "no_source_include", "disable_warnings", "restrict",
                          "device_as_default_execution_space", "device_int128", "no_display_error_number",
                          "fdevice_syntax_only", "minimal")


def _nvvm_options(o: ProgramOptions) -> list[str]:
    arch = str(o.arch)
    if arch.startswith("sm_"):
        arch = f"compute_{arch[3:]}"
    options = [f"-arch={arch}"]
    if o.debug:
        options.append("-g")
    if o.numba_debug:
        options.append("--numba-debug")
    if o.device_code_optimize is False:
        options.append("-opt=0")
    elif o.device_code_optimize is True:
        options.append("-opt=3")
    for name, flag in (("ftz", "-ftz"), ("prec_sqrt", "-prec-sqrt"), ("prec_div", "-prec-div"), ("fma", "-fma")):
        value = getattr(o, name)
        if value is not None:
            options.append(f"{flag}={'1' if value else '0'}")
    order = [f for f in ProgramOptions.__dataclass_fields__]
    bad = [name for name in order if (name in _NVVM_UNSUPPORTED_SET and getattr(o, name) is not None)
           or (name in _NVVM_UNSUPPORTED_TRUE and getattr(o, name))]
    if bad:
        raise CUDAError(f"The following options are not supported by NVVM backend: {', '.join(bad)}")
    return options


#: What an empty (or blank) C++ source compiles as: a comment, which NVRTC reads as the empty program it is.
_EMPTY_TRANSLATION_UNIT = "/* empty translation unit */\n"


class Program:
    """A program to compile: CUDA C++ (NVRTC, through ironaccel), PTX or NVVM IR."""

    __slots__ = ("_code", "_code_type", "_options", "_closed", "_linker", "_nvvm", "_pch", "__weakref__")

    def __init__(self, code: Any, code_type: Any, options: Any = None) -> None:
        code_type = str(code_type).lower()
        if code_type not in _SUPPORTED_CODE_TYPES:
            raise RuntimeError(f"Unsupported code_type={code_type!r} (supported_code_types={_SUPPORTED_CODE_TYPES})")
        options = check_or_create_options(ProgramOptions, options, "Program options")
        if code_type == "c++":
            # cuda.core 1.2 refuses bytes here too (assert_type(code, str)): C++ and PTX sources are str.
            if not isinstance(code, str):
                raise TypeError(f"Expected type str, but got {type(code).__name__}")
            if options.extra_sources is not None:
                raise ValueError("extra_sources is not supported by the NVRTC backend; use the NVVM backend instead")
        elif code_type == "ptx":
            if not isinstance(code, str):
                raise TypeError(f"Expected type str, but got {type(code).__name__}")
            if options.extra_sources is not None:
                raise ValueError("extra_sources is not supported by the PTX backend.")
        else:
            if not isinstance(code, (str, bytes, bytearray)):
                raise TypeError("NVVM IR code must be provided as str, bytes, or bytearray")
            code = code.encode() if isinstance(code, str) else bytes(code)
        self._code = code
        self._code_type = code_type
        self._options = options
        self._closed = False
        self._linker: Any = None
        self._nvvm: Any = None
        self._pch: str | None = None  # the last C++ compile's precompiled-header outcome
        if code_type == "ptx":
            from ._linker import Linker

            self._linker = Linker(ObjectCode._init(code.encode(), "ptx", name=options.name or ""),
                                  options=_linker_options(options))
        elif code_type == "nvvm":
            self._nvvm = _NvvmProgram(code, options)

    def close(self) -> None:
        """Idempotent; a PTX program's Linker and an NVVM program's handle are destroyed."""
        self._closed = True
        if self._linker is not None:
            self._linker.close()
        if self._nvvm is not None:
            self._nvvm.close()

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def backend(self) -> CompilerBackendType:
        if self._code_type == "c++":
            return CompilerBackendType.NVRTC
        if self._code_type == "nvvm":
            return CompilerBackendType.NVVM
        from ._linker import _decide_nvjitlink_or_driver

        return CompilerBackendType.DRIVER if _decide_nvjitlink_or_driver() else CompilerBackendType.NVJITLINK

    @property
    def handle(self) -> Any:
        """C++: this Program (ironaccel keeps no NVRTC program between compiles; cuda.core gives the
        nvrtcProgram); PTX: the Linker's nvJitLinkHandle; NVVM: the nvvmProgram."""
        if self._linker is not None:
            return self._linker.handle
        if self._nvvm is not None:
            return self._nvvm.handle
        return self

    @property
    def pch_status(self) -> Any:
        """NVRTC's precompiled-header outcome of the last C++ compile that asked for one (a PCHStatusType), else
        None."""
        from .typing import PCHStatusType

        return None if self._pch is None else PCHStatusType(self._pch)

    def compile(self, target_type: Any, name_expressions: Any = (), logs: Any = None, *, cache: Any = None
                ) -> ObjectCode:
        """Compile to `target_type`: C++ to ptx, cubin or ltoir; PTX to cubin or ptx; NVVM IR to ptx or ltoir.

        `cache` (a `utils.ProgramCacheResource`) keeps the code bytes under `make_program_cache_key`.
        """
        target = str(target_type).lower()
        if cache is None:
            return _program_compile_uncached(self, target, name_expressions, logs)
        from ironaccel_cuda_compat.cuda_core.utils._program_cache import ProgramCacheResource, make_program_cache_key

        if not isinstance(cache, ProgramCacheResource):
            raise TypeError(f"cache must be a ProgramCacheResource, got {type(cache).__name__}")
        if name_expressions:
            # The cache keeps code bytes; the symbol mapping NVRTC makes for name expressions would be lost on a hit.
            raise ValueError("Program.compile(cache=...) does not support name_expressions: the symbol mapping NVRTC "
                             "builds for them is not kept in the cached bytes, so a hit would break "
                             "get_kernel(name_expression); compile without cache=")
        key = make_program_cache_key(code=self._code, code_type=self._code_type, options=self._options,
                                     target_type=target)
        hit = cache.get(key)
        if hit is not None:
            self._warn_if_unloadable(target)
            if isinstance(hit, ObjectCode):
                return hit
            return ObjectCode._init(bytes(hit), target, name=self._options.name or "")
        result = _program_compile_uncached(self, target, name_expressions, logs)
        cache[key] = result
        return result

    def _warn_if_unloadable(self, target: str) -> None:
        if target == "ptx" and self._code_type == "c++" and not _ptx_loadable():
            warnings.warn("The CUDA driver version is older than the backend version. The generated ptx will not be "
                          "loadable by the current driver (the compat compiles it with nvJitLink when loaded).",
                          RuntimeWarning, stacklevel=3)

    def _compile_uncached(self, target: str, name_expressions: Any, logs: Any) -> ObjectCode:
        if self._code_type == "nvvm":
            if target not in ("ptx", "ltoir"):
                raise ValueError(f'Unsupported target_type="{target}" for NVVM (supported: "ptx", "ltoir")')
            return self._nvvm.compile(target, logs)
        if self._code_type == "ptx":
            if target not in ("cubin", "ptx"):
                raise ValueError(f'Unsupported target_type="{target}" for PTX (supported: "cubin", "ptx")')
            code = self._linker.link(target)
            if logs is not None:
                log = self._linker.get_info_log()
                if log:
                    logs.write(log)
            return code
        if target not in _NVRTC_TARGETS:
            raise ValueError(f'Unsupported target_type="{target}" for NVRTC (supported: {_NVRTC_TARGETS})')
        self._warn_if_unloadable(target)
        return self._compile_nvrtc(target, tuple(name_expressions), logs)

    def _compile_nvrtc(self, target: str, names: tuple[str, ...], logs: Any) -> ObjectCode:
        from ironaccel_cuda.options import CompileOptions

        o = self._options
        args = [a.decode() for a in o._prepare_nvrtc_options()[1:]]
        source = self._code
        if not source or source.isspace():
            # NVRTC compiles an empty translation unit (numba-cuda links CUSource("") for its module callbacks);
            # ironaccel's Program refuses one as a likely mistake, so it gets one that compiles to the same nothing.
            source = _EMPTY_TRANSLATION_UNIT
        try:
            program = _ia.IaProgram(source, CompileOptions(extra=args), name_expressions=list(names),
                                    name=o.name or "default_program")
            code: Any = program.compile(target, arch=o.arch)
        except _ia.CompileError as exc:
            raise NVRTCError(f"NVRTC_ERROR_COMPILATION: {exc.op} failed, compilation log:\n\n{exc.log}") from None
        except _ia.DriverError as exc:
            raise CUDAError(str(exc)) from None
        if logs is not None and code.log:
            logs.write(code.log)
        self._pch = code.pch
        return ObjectCode._init(code.code, target, name=o.name or "", symbol_mapping=dict(code.name_map))

    def __repr__(self) -> str:
        return f"<Program backend='{self.backend.value}'>"


def _linker_options(o: ProgramOptions) -> Any:
    """The LinkerOptions of a PTX program's options (as cuda.core translates them)."""
    from ._linker import LinkerOptions

    return LinkerOptions(name=o.name, arch=o.arch, max_register_count=o.max_register_count,
                         time=None if o.time is None else bool(o.time),
                         link_time_optimization=o.link_time_optimization, debug=o.debug, lineinfo=o.lineinfo,
                         ftz=o.ftz, prec_div=o.prec_div, prec_sqrt=o.prec_sqrt, fma=o.fma,
                         split_compile=o.split_compile, ptxas_options=o.ptxas_options, no_cache=o.no_cache)


class _NvvmProgram:
    """An nvvmProgram with the program's modules added (libdevice lazily, with `use_libdevice`)."""

    __slots__ = ("_nvvm", "_options", "handle")

    def __init__(self, code: bytes, options: ProgramOptions) -> None:
        self._nvvm = nvvm = _get_nvvm_module()
        self._options = options
        self.handle: Any = nvvm.create_program()
        try:
            nvvm.add_module_to_program(self.handle, code, len(code), options.name or "")
            for name, source in options._prepare_extra_sources_bytes() or ():
                nvvm.add_module_to_program(self.handle, source, len(source), name.decode())
            if options.use_libdevice:
                with open(os.fspath(_find_libdevice_path()), "rb") as f:
                    libdevice = f.read()
                nvvm.lazy_add_module_to_program(self.handle, libdevice, len(libdevice), "libdevice")
        except BaseException:
            self.close()
            raise

    def compile(self, target: str, logs: Any) -> ObjectCode:
        nvvm = self._nvvm
        if self.handle is None:
            raise CUDAError("this Program is closed")
        options = self._options.as_bytes("nvvm", target)
        op = "nvvmVerifyProgram"
        try:
            nvvm.verify_program(self.handle, len(options), options)
            op = "nvvmCompileProgram"
            nvvm.compile_program(self.handle, len(options), options)
        except nvvm.nvvmError as exc:
            # cuda.core's nvvmError with the program log; also a CUDAError naming the step
            raise binding_error(nvvm.nvvmError, exc.status, op, self._log()) from None
        out = bytearray(nvvm.get_compiled_result_size(self.handle))
        nvvm.get_compiled_result(self.handle, out)
        if logs is not None:
            log = self._log()
            if log:
                logs.write(log)
        code = bytes(out).rstrip(b"\0") if target == "ptx" else bytes(out)
        return ObjectCode._init(code, target, name=self._options.name or "")

    def _log(self) -> str:
        nvvm = self._nvvm
        size = nvvm.get_program_log_size(self.handle)
        if size <= 1:
            return ""
        buf = bytearray(size)
        nvvm.get_program_log(self.handle, buf)
        return bytes(buf).rstrip(b"\0").decode(errors="replace")

    def close(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            self._nvvm.destroy_program(handle)


def _program_compile_uncached(program: Program, target_type: Any, name_expressions: Any, logs: Any) -> ObjectCode:
    """The compile itself, without cuda.core's `cache=` (a module function, as cuda.core has it)."""
    return program._compile_uncached(str(target_type).lower(), name_expressions, logs)


def _get_nvvm_module() -> Any:
    """cuda.bindings' nvvm module, when it and libNVVM load; RuntimeError otherwise."""
    try:
        from cuda.bindings import nvvm

        nvvm.version()
    except Exception as exc:
        raise RuntimeError(f"NVVM is not available: {exc}") from exc
    return nvvm


def _find_libdevice_path() -> Any:
    import cuda.pathfinder

    return cuda.pathfinder.find_bitcode_lib("device")


def _ptx_loadable() -> bool:
    """`_can_load_generated_ptx()`, True where no driver is loaded (there is nothing to load PTX into)."""
    from ironaccel.errors import NotAvailable

    try:
        return _can_load_generated_ptx()
    except NotAvailable:
        return True


def _can_load_generated_ptx() -> bool:
    """True when the driver's JIT can load PTX from this NVRTC (NVRTC's version is not newer than the driver's).

    The compat's ObjectCode loads newer PTX anyway, compiled by nvJitLink; this says what cuda.core says.
    """
    from ironaccel_cuda.program import nvrtc_version

    return (*nvrtc_version(), 0) <= driver_version()
