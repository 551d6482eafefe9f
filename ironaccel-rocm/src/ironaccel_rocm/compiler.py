"""Runtime compilation of HIP C++ into AMDGPU code objects, with hipRTC.

    from ironaccel_rocm import Program
    code = Program(source, ["-O3"]).compile(arch="gfx90a")
    code.format        # "elf" (one code object) or "bundle" (clang offload bundle)
    bytes(code)        # what hipModuleLoadData takes

It needs no GPU: only the HIP runtime library (hipRTC) and its code-object
manager.  Without `arch`, it compiles for the first HIP device's target (its
gcnArchName, e.g. ``gfx90a:sramecc+:xnack-``) and refuses when there is no
GPU to ask: there is no silent default.  Target IDs are checked before hipRTC
sees them (it aborts the process on a bad one).  Compile errors raise
`CompileError` carrying the compiler's log.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Mapping, Sequence

from ironaccel.errors import CompileError, DriverError, InvalidArgument, NotAvailable, OutOfMemory

from . import hiprtc

__all__ = ["Program", "CodeObject", "ELF_MAGIC", "BUNDLE_MAGIC", "EM_AMDGPU", "amdgpu_mach"]

BACKEND = hiprtc.BACKEND
ELF_MAGIC = b"\x7fELF"
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
EM_AMDGPU = 224  # ELF e_machine of AMDGPU code objects

# gfx90a, gfx1030, gfx942, optionally with target features: gfx90a:sramecc+:xnack-
_ARCH = re.compile(r"gfx[0-9a-f]{3,5}(:[a-z0-9_]+[+-])*")  # fullmatch: "$" would let a final newline by
#: The target features a target ID may carry (LLVM AMDGPU "Target ID"), each at most once.
TARGET_FEATURES = ("sramecc", "xnack")


class CodeObject(bytes):
    """Compiled device code: the bytes hipModuleLoadData takes, plus what made them."""

    arch: str
    log: str
    options: tuple[str, ...]

    def __new__(cls, data: bytes, arch: str, log: str, options: tuple[str, ...]) -> CodeObject:
        op = "CodeObject"
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidArgument(BACKEND, op, detail=f"data must be bytes, got {type(data).__name__}")
        if not isinstance(arch, str) or not isinstance(log, str):
            raise InvalidArgument(BACKEND, op, detail=(
                f"arch and log must be str, got {type(arch).__name__} and {type(log).__name__}"))
        if isinstance(options, (str, bytes)) or not isinstance(options, (tuple, list)) or not all(
                isinstance(o, str) for o in options):
            raise InvalidArgument(BACKEND, op, detail=f"options must be a tuple of str, got {options!r}")
        obj = super().__new__(cls, data)
        obj.arch, obj.log, obj.options = arch, log, tuple(options)
        return obj

    @property
    def format(self) -> str:
        """'elf' for a bare AMDGPU code object, 'bundle' for a clang offload bundle."""
        if self.startswith(ELF_MAGIC):
            return "elf"
        if self.startswith(BUNDLE_MAGIC):
            return "bundle"
        return "unknown"

    def __repr__(self) -> str:
        return f"CodeObject({self.format}, arch={self.arch!r}, {len(self)} bytes)"


def amdgpu_mach(elf: bytes) -> int | None:
    """The EF_AMDGPU_MACH value (the GPU) of a 64-bit AMDGPU ELF, or None if it is not one."""
    if not isinstance(elf, (bytes, bytearray, memoryview)):
        raise InvalidArgument(BACKEND, "amdgpu_mach", detail=f"elf must be bytes, got {type(elf).__name__}")
    elf = bytes(elf)
    if len(elf) < 64 or not elf.startswith(ELF_MAGIC) or elf[4] != 2:  # ELFCLASS64
        return None
    if int.from_bytes(elf[18:20], "little") != EM_AMDGPU:
        return None
    return int.from_bytes(elf[48:52], "little") & 0xFF


class Program:
    """HIP C++ source with its compile options; `compile(arch)` makes a CodeObject.

    `headers` maps include names to their source, for ``#include "name"``
    without files.  Kernels meant for lookup by name should be ``extern "C"``.
    """

    def __init__(
        self,
        source: str | bytes,
        options: Sequence[str] = (),
        *,
        name: str = "kernel.hip",
        headers: Mapping[str, str | bytes] | None = None,
    ):
        op = "hiprtcCreateProgram"
        if isinstance(source, str):
            source = _encode(source, "source", op)
        if not isinstance(source, bytes) or not source.strip():
            raise InvalidArgument(BACKEND, op, detail="source must be non-empty str or bytes")
        if b"\0" in source:
            raise InvalidArgument(BACKEND, op, detail="source contains a NUL byte")
        if not isinstance(name, str):
            raise InvalidArgument(BACKEND, op, detail=f"name must be a str, got {type(name).__name__} {name!r}")
        _c_string(name, "name", op)
        self.source = source
        self.name = name
        self.options = _check_options(options, op)
        self.headers = _check_headers(headers, op)

    def compile(self, arch: str | None = None, options: Sequence[str] = ()) -> CodeObject:
        """Compile for one GPU target (``gfx90a``, ``gfx942``, ``gfx90a:xnack+``); CompileError on failure.

        Without `arch`, the target of HIP device 0 (InvalidArgument when there is no AMD GPU to ask).
        """
        op = "hiprtcCompileProgram"
        if arch is None:
            arch = _first_device_target(op)
        if not isinstance(arch, str) or not _ARCH.fullmatch(arch):
            raise InvalidArgument(BACKEND, op, detail=f"arch must be one GPU name like 'gfx90a', got {arch!r}")
        rtc = hiprtc.load()
        base = arch.split(":", 1)[0]
        if rtc.supported_isas is not None and base not in rtc.supported_isas:
            known = ", ".join(sorted(rtc.supported_isas, key=_arch_key))
            raise InvalidArgument(
                BACKEND, op, detail=f"{base} is not a target of this hipRTC ({rtc.path}); it knows {known}"
            )
        _check_features(rtc, arch, op)
        flags = (f"--offload-arch={arch}", *self.options, *_check_options(options, op))
        return _compile(rtc, self, arch, flags)

    def __repr__(self) -> str:
        return f"Program({self.name!r}, {len(self.source)} bytes, options={list(self.options)})"


def _encode(text: str, what: str, op: str) -> bytes:
    """`text` as UTF-8; InvalidArgument (not UnicodeEncodeError) for a lone surrogate."""
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        raise InvalidArgument(BACKEND, op, detail=f"{what} is not valid UTF-8 text: {exc.reason} at index "
                              f"{exc.start}") from None


def _c_string(text: str, what: str, op: str) -> bytes:
    """`text` as a C string: UTF-8 without NUL bytes (hipRTC would cut it there)."""
    data = _encode(text, what, op)
    if b"\0" in data:
        raise InvalidArgument(BACKEND, op, detail=f"{what} contains a NUL byte")
    return data


def _check_options(options: Sequence[str], op: str) -> tuple[str, ...]:
    if isinstance(options, (str, bytes, bytearray)):
        raise InvalidArgument(BACKEND, op, detail=f"options must be a sequence of str, got {options!r}")
    try:
        items = tuple(options)  # once: a generator is read a single time, and nothing of it is lost
    except TypeError:
        raise InvalidArgument(BACKEND, op, detail=(
            f"options must be a sequence of str, got {type(options).__name__} {options!r}")) from None
    if not all(isinstance(o, str) for o in items):
        raise InvalidArgument(BACKEND, op, detail=f"options must be a sequence of str, got {list(items)!r}")
    for o in items:
        if o.startswith(("--offload-arch", "--amdgpu-target", "-o")):
            raise InvalidArgument(BACKEND, op, detail=f"{o!r} is set by compile(arch=...), not by options")
        if "\0" in o:
            raise InvalidArgument(BACKEND, op, detail="an option contains a NUL byte")
        _encode(o, f"option {o!r}", op)
    return items


def _check_headers(headers: Mapping[str, str | bytes] | None, op: str) -> dict[str, bytes]:
    """The in-memory headers as {name: source bytes}; InvalidArgument for anything hipRTC cannot take."""
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise InvalidArgument(BACKEND, op, detail=(
            f"headers must be a mapping of include name to source, got {type(headers).__name__}"))
    out: dict[str, bytes] = {}
    for key, value in headers.items():
        if not isinstance(key, str) or not key:
            raise InvalidArgument(BACKEND, op, detail=f"a header name must be a non-empty str, got {key!r}")
        _c_string(key, f"header name {key!r}", op)
        if isinstance(value, str):
            data = _c_string(value, f"header {key!r}", op)
        elif isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
            if b"\0" in data:
                raise InvalidArgument(BACKEND, op, detail=f"header {key!r} contains a NUL byte")
        else:
            raise InvalidArgument(BACKEND, op, detail=(
                f"header {key!r} must be str or bytes, got {type(value).__name__}"))
        out[key] = data
    return out


def _check_features(rtc: hiprtc.Hiprtc, arch: str, op: str) -> None:
    """Refuse target features hipRTC would abort on: unknown names, repeats, ones this GPU lacks."""
    base, *features = arch.split(":")
    if not features:
        return
    names = [f[:-1] for f in features]
    unknown = [n for n in names if n not in TARGET_FEATURES]
    if unknown or len(set(names)) != len(names):
        what = f"unknown target feature {unknown[0]!r}" if unknown else "a target feature given twice"
        raise InvalidArgument(BACKEND, op, detail=(
            f"{arch!r} has {what}; a target ID is a GPU name and at most one each of "
            f"{', '.join(f + '+/-' for f in TARGET_FEATURES)}, e.g. 'gfx90a:sramecc+:xnack-'"))
    valid = rtc.valid_target(arch)
    if valid is None:
        raise InvalidArgument(BACKEND, op, detail=(
            f"cannot check the target features of {arch!r}: the code-object manager (libamd_comgr) could not "
            f"be asked, and hipRTC aborts on a feature the GPU lacks; pass {base!r} alone"))
    if not valid:
        has = [f for f in TARGET_FEATURES if rtc.valid_target(f"{base}:{f}+")]
        offers = f"{base} offers only {' and '.join(has)}" if has else f"{base} has no target features"
        raise InvalidArgument(BACKEND, op, detail=f"{arch!r} is not a valid target ID: {offers}")


def _first_device_target(op: str) -> str:
    """The gcnArchName of HIP device 0, for compile() without arch; InvalidArgument when there is none."""
    from . import binding
    from .properties import text

    why = "no AMD GPU to take it from"
    try:
        hip = binding.load()
        if int(binding.call(hip.hipGetDeviceCount, "hipGetDeviceCount")) > 0:
            target = text(getattr(binding.call(hip.hipGetDeviceProperties, "hipGetDeviceProperties", 0),
                                  "gcnArchName", b""))
            if target:
                return target
            why = "HIP device 0 reports no gcnArchName"
    except (NotAvailable, DriverError) as exc:
        why = f"no AMD GPU to take it from ({exc.reason if isinstance(exc, NotAvailable) else exc})"
    raise InvalidArgument(BACKEND, op, detail=(
        f"compile() needs arch=, the GPU target to compile for (e.g. 'gfx90a'): {why}"))


def _arch_key(name: str) -> tuple[int, str]:
    return (len(name), name)


def _check(code: int, op: str) -> None:
    if code == 0:
        return
    name = hiprtc.result_name(code)
    if code == 1:
        raise OutOfMemory(BACKEND, op, code, name)
    if code in (3, 5):
        raise InvalidArgument(BACKEND, op, code, name)
    raise DriverError(BACKEND, op, code, name)


def _compile(rtc: hiprtc.Hiprtc, program: Program, arch: str, flags: tuple[str, ...]) -> CodeObject:
    with hiprtc.COMPILE_LOCK:
        return _compile_locked(rtc, program, arch, flags)


def _compile_locked(rtc: hiprtc.Hiprtc, program: Program, arch: str, flags: tuple[str, ...]) -> CodeObject:
    lib = rtc.lib
    handle = ctypes.c_void_p()
    names = list(program.headers)
    n = len(names)
    header_src = (ctypes.c_char_p * n)(*program.headers.values()) if n else None
    header_names = (ctypes.c_char_p * n)(*(k.encode() for k in names)) if n else None
    created = lib.hiprtcCreateProgram(
        ctypes.byref(handle), program.source, program.name.encode(), n, header_src, header_names
    )
    _check(created, "hiprtcCreateProgram")
    try:
        encoded = [f.encode() for f in flags]
        argv = (ctypes.c_char_p * len(encoded))(*encoded)
        result = lib.hiprtcCompileProgram(handle, len(encoded), argv)
        log = _log(lib, handle)
        if result != 0:
            raise CompileError(BACKEND, "hiprtcCompileProgram", log or hiprtc.result_name(result), result,
                               hiprtc.result_name(result))
        size = ctypes.c_size_t()
        _check(lib.hiprtcGetCodeSize(handle, ctypes.byref(size)), "hiprtcGetCodeSize")
        if size.value == 0:
            raise CompileError(BACKEND, "hiprtcGetCode", log or "hipRTC produced no code")
        code = ctypes.create_string_buffer(size.value)
        _check(lib.hiprtcGetCode(handle, code), "hiprtcGetCode")
        return CodeObject(code.raw, arch, log, flags)
    finally:
        lib.hiprtcDestroyProgram(ctypes.byref(handle))


def _log(lib: ctypes.CDLL, handle: ctypes.c_void_p) -> str:
    size = ctypes.c_size_t()
    if lib.hiprtcGetProgramLogSize(handle, ctypes.byref(size)) != 0 or size.value <= 1:
        return ""
    buf = ctypes.create_string_buffer(size.value)
    if lib.hiprtcGetProgramLog(handle, buf) != 0:
        return ""
    return buf.value.decode(errors="replace")
