"""Runtime compilation with NVRTC: CUDA C++ to PTX or CUBIN.

    prog = Program(source, CompileOptions(std="c++17", fast_math=True), name_expressions=["saxpy<float>"])
    code = prog.compile("cubin")            # arch from the current device, else device 0
    mod = dev.load_module(code); fn = mod.function("saxpy<float>")

CUBIN for the device's own architecture is the default because it needs no
driver JIT: PTX made by a newer NVRTC than the driver cannot be loaded.
Results are cached in memory and on disk (see `cache`); `ObjectCode.cache`
says where a result came from.  Failures raise `CompileError` with NVRTC's log.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType
from typing import Any

from . import cache
from .errors import BACKEND, CompileError, NotAvailable, Unsupported, invalid

__all__ = ["CompileOptions", "Program", "ObjectCode", "nvrtc_version", "supported_archs", "normalize_arch"]

NVRTC_FIX = "pip install nvidia-cuda-nvrtc (or ironaccel-cuda[nvrtc]), or install the CUDA toolkit"
_EMPTY: Mapping[str, str] = MappingProxyType({})


def _nvrtc() -> ModuleType:
    from ironaccel.probing import import_binding

    return import_binding(BACKEND, "cuda.bindings.nvrtc", "cuda-bindings")


_version: tuple[int, int] | None = None
_archs: tuple[int, ...] | None = None


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library; NotAvailable if it cannot be loaded."""
    global _version
    if _version is None:
        nv = _nvrtc()
        try:
            err, major, minor = nv.nvrtcVersion()
        except RuntimeError as exc:  # cuda.pathfinder could not find libnvrtc
            raise NotAvailable(BACKEND, f"NVRTC (libnvrtc) could not be loaded: {exc}", fix=NVRTC_FIX,
                               library="libnvrtc.so") from exc
        if err:
            raise NotAvailable(BACKEND, f"nvrtcVersion failed: {err!r}", fix=NVRTC_FIX)
        _version = (int(major), int(minor))
    return _version


def supported_archs() -> tuple[int, ...]:
    """The compute capabilities this NVRTC can target, e.g. (75, 80, ..., 120)."""
    global _archs
    if _archs is None:
        nvrtc_version()
        nv = _nvrtc()
        err, archs = nv.nvrtcGetSupportedArchs()
        if err:
            raise NotAvailable(BACKEND, f"nvrtcGetSupportedArchs failed: {err!r}", fix=NVRTC_FIX)
        _archs = tuple(sorted(int(a) for a in archs))
    return _archs


@dataclass(frozen=True)
class CompileOptions:
    """Typed NVRTC options.  `None` leaves NVRTC's default.

    std: "c++11" / "c++14" / "c++17" / "c++20".  defines: {"NAME": value or
    None} or ["NAME", "NAME=VALUE"].  include_paths: folders for #include.
    fast_math: --use_fast_math (implies ftz, fast division and sqrt, fmad).
    ftz / prec_div / prec_sqrt / fmad: the individual switches.
    max_registers: --maxrregcount.  line_info: -lineinfo.  debug: -G.
    extra: further raw NVRTC options, passed last.
    """

    std: str | None = None
    defines: Mapping[str, Any] | Sequence[str] = field(default_factory=dict)
    include_paths: Sequence[str] = ()
    fast_math: bool = False
    ftz: bool | None = None
    prec_div: bool | None = None
    prec_sqrt: bool | None = None
    fmad: bool | None = None
    max_registers: int | None = None
    line_info: bool = False
    debug: bool = False
    extra: Sequence[str] = ()

    def __post_init__(self) -> None:
        op = "CompileOptions"
        if self.std is not None and not re.fullmatch(r"c\+\+(03|11|14|17|20|23)", str(self.std)):
            raise invalid(op, f"std must look like 'c++17', got {self.std!r}")
        for name in ("fast_math", "line_info", "debug"):
            if not isinstance(getattr(self, name), bool):
                raise invalid(op, f"{name} must be a bool, got {getattr(self, name)!r}")
        for name in ("ftz", "prec_div", "prec_sqrt", "fmad"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise invalid(op, f"{name} must be a bool or None, got {value!r}")
        if self.max_registers is not None and (
            isinstance(self.max_registers, bool) or not isinstance(self.max_registers, int) or self.max_registers <= 0
        ):
            raise invalid(op, f"max_registers must be a positive int, got {self.max_registers!r}")
        if isinstance(self.include_paths, (str, bytes)) or isinstance(self.extra, (str, bytes)):
            raise invalid(op, "include_paths and extra are sequences of str, not a single str")
        if isinstance(self.defines, (str, bytes)):
            raise invalid(op, "defines is a mapping or a sequence of 'NAME[=VALUE]', not a single str")
        for name in self._define_args():
            if not re.fullmatch(r"-D[A-Za-z_]\w*(=.*)?", name, re.S):
                raise invalid(op, f"bad define {name[2:]!r}")

    def _define_args(self) -> list[str]:
        if isinstance(self.defines, Mapping):
            return [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in self.defines.items()]
        return [f"-D{d}" for d in self.defines]

    def to_args(self) -> list[str]:
        """The NVRTC option strings (without the architecture)."""
        args: list[str] = []
        if self.std:
            args.append(f"--std={self.std}")
        args += self._define_args()
        args += [f"--include-path={p}" for p in self.include_paths]
        if self.fast_math:
            args.append("--use_fast_math")
        for name, flag in (("ftz", "--ftz"), ("prec_div", "--prec-div"), ("prec_sqrt", "--prec-sqrt"),
                           ("fmad", "--fmad")):
            value = getattr(self, name)
            if value is not None:
                args.append(f"{flag}={'true' if value else 'false'}")
        if self.max_registers is not None:
            args.append(f"--maxrregcount={self.max_registers}")
        if self.line_info:
            args.append("--generate-line-info")
        if self.debug:
            args.append("--device-debug")
        args += [str(x) for x in self.extra]
        return args


@dataclass(frozen=True)
class ObjectCode:
    """Compiled device code: `code` bytes of `kind` ("cubin" or "ptx") for `arch`.

    `name_map` maps each name expression to its mangled symbol; `log` holds
    NVRTC's warnings; `cache` is "memory", "disk" or None (freshly compiled).
    """

    code: bytes
    kind: str
    arch: str
    name_map: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    log: str = ""
    cache: str | None = None

    def __repr__(self) -> str:
        return f"<ObjectCode {self.kind} {self.arch} {len(self.code)} bytes cache={self.cache}>"


_ARCH = re.compile(r"(?:sm_|compute_)?(\d+)([af]?)")


def normalize_arch(arch: Any, target: str) -> str:
    """"sm_90" (cubin) or "compute_90" (ptx) from "sm_90", "90", 90, "9.0", (9, 0) or a Device."""
    op = "nvrtcCompileProgram"
    if arch is None:
        arch = _current_arch()
    elif hasattr(arch, "compute_capability"):
        arch = arch.compute_capability
    if isinstance(arch, tuple) and len(arch) == 2 and all(isinstance(x, int) for x in arch):
        digits, suffix = f"{arch[0]}{arch[1]}", ""
    else:
        text = str(arch).strip().replace(".", "") if not isinstance(arch, bool) else "?"
        m = _ARCH.fullmatch(text)
        if m is None:
            raise invalid(op, f"arch must look like 'sm_90', 90 or (9, 0), got {arch!r}")
        digits, suffix = m.group(1), m.group(2)
    number = int(digits)
    archs = supported_archs()
    if target == "ptx":
        usable = [a for a in archs if a <= number]
        if not usable:
            raise Unsupported(BACKEND, op, f"NVRTC {nvrtc_version()} cannot target compute_{number} (supports {archs})")
        chosen = number if number in archs else usable[-1]
        return f"compute_{chosen}{suffix if chosen == number else ''}"
    if number not in archs:
        raise Unsupported(
            BACKEND, op,
            f"NVRTC {nvrtc_version()[0]}.{nvrtc_version()[1]} cannot make CUBIN for sm_{number} (supports "
            f"{', '.join(map(str, archs))}); install a matching nvidia-cuda-nvrtc or compile to PTX",
        )
    return f"sm_{number}{suffix}"


def _current_arch() -> tuple[int, int]:
    """Compute capability of the device whose context is current here, else of device 0."""
    from ._driver import call, driver, try_call

    drv = driver()
    err, cudev = try_call("cuCtxGetDevice")
    if err:
        cudev = call("cuDeviceGet", 0)
    attr = drv.CUdevice_attribute
    major = int(call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cudev))
    minor = int(call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cudev))
    return major, minor


class Program:
    """CUDA C++ source, its options and name expressions; `compile()` runs NVRTC (or hits the cache)."""

    def __init__(self, source: str, options: CompileOptions | None = None, name_expressions: Iterable[str] = (), *,
                 name: str = "ironaccel.cu", headers: Mapping[str, str] | None = None):
        op = "nvrtcCreateProgram"
        if not isinstance(source, str) or not source.strip():
            raise invalid(op, "source must be a non-empty str of CUDA C++")
        if options is not None and not isinstance(options, CompileOptions):
            raise invalid(op, f"options must be CompileOptions, got {type(options).__name__}")
        names = tuple(name_expressions)
        if any(not isinstance(n, str) or not n for n in names):
            raise invalid(op, f"name expressions must be non-empty str, got {names!r}")
        headers = dict(headers or {})
        if any(not isinstance(k, str) or not isinstance(v, str) for k, v in headers.items()):
            raise invalid(op, "headers maps include names (str) to their source (str)")
        self.source = source
        self.options = options or CompileOptions()
        self.name_expressions = names
        self.name = name
        self.headers = headers

    def compile(self, target: str = "cubin", arch: Any = None) -> ObjectCode:
        """Compile to "cubin" (default) or "ptx" for `arch` (default: the current device's)."""
        op = "nvrtcCompileProgram"
        if target not in ("cubin", "ptx"):
            raise invalid(op, f"target must be 'cubin' or 'ptx', got {target!r}")
        version = nvrtc_version()
        arch_name = normalize_arch(arch, target)
        args = [*self.options.to_args(), f"--gpu-architecture={arch_name}"]
        enabled = cache.cache_enabled()
        key = cache.cache_key(
            source=self.source, headers=sorted(self.headers.items()), names=list(self.name_expressions),
            options=args, target=target, arch=arch_name, nvrtc=f"{version[0]}.{version[1]}",
        )
        if enabled:
            hit = cache.memory_get(key)
            if hit is not None:
                return dataclasses.replace(hit, cache="memory")
            entry = cache.disk_get(key)
            if entry is not None:
                meta, payload = entry
                code = ObjectCode(payload, target, arch_name, MappingProxyType(dict(meta.get("names", {}))),
                                  str(meta.get("log", "")), cache="disk")
                cache.memory_put(key, dataclasses.replace(code, cache=None))
                return code
        code = self._compile(args, target, arch_name)
        if enabled:
            cache.memory_put(key, code)
            cache.disk_put(key, {"kind": target, "arch": arch_name, "names": dict(code.name_map), "log": code.log},
                           code.code)
        return code

    def _compile(self, args: list[str], target: str, arch_name: str) -> ObjectCode:
        nv = _nvrtc()
        header_names = [k.encode() for k in self.headers]
        header_srcs = [v.encode() for v in self.headers.values()]
        err, prog = nv.nvrtcCreateProgram(self.source.encode(), self.name.encode(), len(header_srcs), header_srcs,
                                          header_names)
        _check(nv, err, "nvrtcCreateProgram")
        try:
            for expr in self.name_expressions:
                (err,) = nv.nvrtcAddNameExpression(prog, expr.encode())
                _check(nv, err, "nvrtcAddNameExpression", f"name expression {expr!r}")
            options = [a.encode() for a in args]
            (err,) = nv.nvrtcCompileProgram(prog, len(options), options)
            log = _log(nv, prog)
            if err:
                raise CompileError(BACKEND, "nvrtcCompileProgram", log or _error_string(nv, err), int(err),
                                   getattr(err, "name", None))
            if target == "ptx":
                err, size = nv.nvrtcGetPTXSize(prog)
                _check(nv, err, "nvrtcGetPTXSize")
                buf = b" " * size
                (err,) = nv.nvrtcGetPTX(prog, buf)
                _check(nv, err, "nvrtcGetPTX")
            else:
                err, size = nv.nvrtcGetCUBINSize(prog)
                _check(nv, err, "nvrtcGetCUBINSize")
                buf = b" " * size
                (err,) = nv.nvrtcGetCUBIN(prog, buf)
                _check(nv, err, "nvrtcGetCUBIN")
            names = {}
            for expr in self.name_expressions:
                err, lowered = nv.nvrtcGetLoweredName(prog, expr.encode())
                _check(nv, err, "nvrtcGetLoweredName", f"name expression {expr!r}")
                names[expr] = lowered.decode() if isinstance(lowered, bytes) else str(lowered)
        finally:
            nv.nvrtcDestroyProgram(prog)
        return ObjectCode(bytes(buf), target, arch_name, MappingProxyType(names), log, cache=None)


def _log(nv: ModuleType, prog: Any) -> str:
    err, size = nv.nvrtcGetProgramLogSize(prog)
    if err or size <= 1:
        return ""
    buf = b" " * size
    (err,) = nv.nvrtcGetProgramLog(prog, buf)
    if err:
        return ""
    return buf.rstrip(b"\0").decode(errors="replace").strip()


def _error_string(nv: ModuleType, err: Any) -> str:
    try:
        res = nv.nvrtcGetErrorString(err)
        text = res[1] if isinstance(res, tuple) else res
        return text.decode() if isinstance(text, bytes) else str(text)
    except Exception:
        return getattr(err, "name", str(err))


def _check(nv: ModuleType, err: Any, op: str, what: str = "") -> None:
    if err:
        message = _error_string(nv, err)
        raise CompileError(BACKEND, op, f"{what}: {message}" if what else message, int(err), getattr(err, "name", None))
