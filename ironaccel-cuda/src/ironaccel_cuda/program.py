"""Runtime compilation with NVRTC: CUDA C++ to PTX or CUBIN.

    prog = Program(source, CompileOptions(std="c++17", fast_math=True), name_expressions=["saxpy<float>"])
    code = prog.compile("cubin")            # arch from the current device, else device 0
    mod = dev.load_module(code); fn = mod.function("saxpy<float>")

CUBIN for the device's own architecture is the default because it needs no
driver JIT: PTX made by a newer NVRTC than the driver cannot be loaded.
Results are cached in memory and on disk (see `cache`); `ObjectCode.cache`
says where a result came from.  Failures raise `CompileError` with NVRTC's log.

A cache hit never loads NVRTC.  Loading it is slow -- far slower than
reading a cached CUBIN -- so the cache key identifies the NVRTC build without
loading it.  The first process that loads NVRTC records in the cache folder
(`nvrtc-<environment>.json`; one record per Python environment and library
search path) the file it actually loaded (its real path, read from
/proc/self/maps), that file's size and modification time, NVRTC's version and
its supported architectures.  A later process that finds the same file
unchanged (one `stat`) takes the version and architectures from the record;
if the file changed or vanished, or the record is unreadable, NVRTC is loaded
and the record rewritten.  The key holds the version and the file's identity,
so a different or rebuilt NVRTC never hits another's entries; if a compile
then loads a different NVRTC than the record named, the key is recomputed
from the loaded one.  Where the loaded file cannot be found (no
/proc/self/maps) NVRTC is always loaded.  This module imports nothing heavy
(not the `ironaccel` core, not `cuda.bindings`) until a compile misses.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any

from . import cache

if TYPE_CHECKING:
    from .options import CompileOptions

__all__ = [
    "CompileOptions", "Program", "ObjectCode", "nvrtc_version", "supported_archs", "normalize_arch", "source_text",
]


def __getattr__(name: str) -> Any:
    if name == "CompileOptions":  # defined in `options`, imported only when used (a cache hit never needs it)
        from .options import CompileOptions

        return CompileOptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

BACKEND = "cuda"
NVRTC_FIX = "pip install nvidia-cuda-nvrtc (or ironaccel-cuda[nvrtc]), or install the CUDA toolkit"
_EMPTY: Mapping[str, str] = MappingProxyType({})
_EMPTY_PARAMS: Mapping[str, tuple[str, ...]] = MappingProxyType({})


def _invalid(op: str, detail: str) -> Exception:
    from .errors import invalid

    return invalid(op, detail)


def _not_available(reason: str, **kwargs: Any) -> Exception:
    from .errors import NotAvailable

    return NotAvailable(BACKEND, reason, fix=NVRTC_FIX, **kwargs)


def _unsupported(op: str, why: str) -> Exception:
    from .errors import Unsupported

    return Unsupported(BACKEND, op, why)


def _nvrtc() -> ModuleType:
    from ironaccel.probing import import_binding

    return import_binding(BACKEND, "cuda.bindings.nvrtc", "cuda-bindings")


# -- which NVRTC, without loading it ---------------------------------------------------------

_info: tuple[tuple[int, int], tuple[int, ...], str] | None = None  # (version, archs, identity)
_loaded: tuple[tuple[int, int], tuple[int, ...], str] | None = None  # the same, read from the loaded library


def _record_name() -> str:
    """The identity record's file name: one per Python environment and library search path."""
    parts = [sys.prefix, sys.executable] + [os.environ.get(v, "") for v in (
        "LD_LIBRARY_PATH", "PYTHONPATH", "CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX", "CUDA_PYTHON_NVRTC_PATH")]
    return f"nvrtc-{cache.sha256(chr(0).join(parts).encode()).hexdigest()[:16]}.json"


def _file_identity(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{path}|{st.st_size}|{st.st_mtime_ns}"


def _loaded_library_path() -> str | None:
    """The real path of the libnvrtc mapped into this process (Linux), else None."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1]
                if path.rsplit("/", 1)[-1].startswith("libnvrtc.so"):
                    return os.path.realpath(path)
    except OSError:
        pass
    return None


def _from_record() -> tuple[tuple[int, int], tuple[int, ...], str] | None:
    record = cache.read_json(_record_name())
    try:
        version = (int(record["version"][0]), int(record["version"][1]))
        archs = tuple(int(a) for a in record["archs"])
        identity = str(record["identity"])
        path = str(record["path"])
    except (TypeError, KeyError, IndexError, ValueError):
        return None
    if not archs or _file_identity(path) != identity:
        return None
    return version, archs, identity


def _load_info() -> tuple[tuple[int, int], tuple[int, ...], str]:
    """Load NVRTC, ask it its version and architectures, and record the file it came from."""
    global _loaded
    if _loaded is not None:
        return _loaded
    nv = _nvrtc()
    try:
        err, major, minor = nv.nvrtcVersion()
    except RuntimeError as exc:  # cuda.pathfinder could not find libnvrtc
        raise _not_available(f"NVRTC (libnvrtc) could not be loaded: {exc}", library="libnvrtc.so") from exc
    if err:
        raise _not_available(f"nvrtcVersion failed: {err!r}")
    err, archs = nv.nvrtcGetSupportedArchs()
    if err:
        raise _not_available(f"nvrtcGetSupportedArchs failed: {err!r}")
    version = (int(major), int(minor))
    arch_list = tuple(sorted(int(a) for a in archs))
    path = _loaded_library_path()
    identity = (_file_identity(path) if path else None) or "unidentified"
    if path and identity != "unidentified" and cache.cache_enabled():
        import json

        record = {"path": path, "identity": identity, "version": list(version), "archs": list(arch_list)}
        cache.write_atomic(_record_name(), json.dumps(record).encode())
    _loaded = (version, arch_list, identity)
    return _loaded


def _nvrtc_info() -> tuple[tuple[int, int], tuple[int, ...], str]:
    """(version, supported archs, identity) of NVRTC: from the record when its file is unchanged, else loaded."""
    global _info
    if _info is None:
        found = _from_record() if _loaded is None and cache.cache_enabled() else None
        _info = found if found is not None else _load_info()
    return _info


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library; NotAvailable if it cannot be loaded."""
    return _nvrtc_info()[0]


def supported_archs() -> tuple[int, ...]:
    """The compute capabilities this NVRTC can target, e.g. (75, 80, ..., 120)."""
    return _nvrtc_info()[1]


class ObjectCode(bytes):
    """Compiled device code: the bytes themselves (`bytes(code)`, `len(code)`), of `kind` for `arch`.

    `kind` is "cubin", "ptx", "ltoir" (NVRTC `-dlto` output, for `Linker`) or
    "fatbin"; `code` is the same bytes as a plain `bytes`.  `name_map` maps each
    name expression to its mangled symbol; `log` holds NVRTC's (or nvJitLink's)
    warnings; `cache` is "memory", "disk" or None (freshly made); `params` maps
    each kernel symbol to the PTX types of its parameters (from the PTX NVRTC
    makes alongside), which launches use to refuse a float for an integer
    parameter; `pch` is NVRTC's precompiled-header outcome of a compile that asked
    for one (`--create-pch` / `--pch`): "created", "not_attempted" or "failed",
    else None.  The same
    shape as ironaccel-rocm's `CodeObject`: a `bytes` that carries what made it.
    Immutable; `replace(**changes)` makes a changed copy.
    """

    _FIELDS = ("code", "kind", "arch", "name_map", "log", "cache", "params", "pch")
    kind: str
    arch: str
    name_map: Mapping[str, str]
    log: str
    cache: str | None
    params: Mapping[str, tuple[str, ...]]
    pch: str | None

    def __new__(cls, code: bytes, kind: str, arch: str, name_map: Mapping[str, str] = _EMPTY, log: str = "",
                cache: str | None = None, params: Mapping[str, tuple[str, ...]] = _EMPTY_PARAMS,
                pch: str | None = None) -> ObjectCode:
        obj = super().__new__(cls, code)
        set_ = object.__setattr__
        for name, value in (("kind", kind), ("arch", arch), ("name_map", name_map), ("log", log),
                            ("cache", cache), ("params", params), ("pch", pch)):
            set_(obj, name, value)
        return obj

    @property
    def code(self) -> bytes:
        """The image as plain `bytes` (without the metadata this object carries)."""
        return bytes(self)

    def replace(self, *args: Any, **changes: Any) -> Any:  # type: ignore[override]
        """A copy with some fields changed (`replace(log="")`); with positional arguments, `bytes.replace`."""
        if args:
            return bytes(self).replace(*args)
        fields = {name: getattr(self, name) for name in self._FIELDS}
        fields.update(changes)
        return ObjectCode(**fields)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ObjectCode is immutable: cannot set {name!r} (use replace())")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ObjectCode is immutable: cannot delete {name!r}")

    def _fields(self) -> tuple[Any, ...]:
        return (bytes(self), self.kind, self.arch, tuple(sorted(self.name_map.items())), self.log, self.cache,
                tuple(sorted(self.params.items())), self.pch)

    def __eq__(self, other: object) -> bool:
        return other.__class__ is ObjectCode and self._fields() == other._fields()  # type: ignore[attr-defined]

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self._fields())

    def __reduce__(self) -> Any:
        return (ObjectCode, tuple(dict(getattr(self, name)) if name in ("name_map", "params") else getattr(self, name)
                                  for name in self._FIELDS))

    def __repr__(self) -> str:
        return f"<ObjectCode {self.kind} {self.arch} {len(self)} bytes cache={self.cache}>"


_ARCH_PATTERN = r"(?:sm_|compute_)?(\d+)([af]?)"


def _parse_arch(text: str) -> tuple[str, str] | None:
    """("90", "a") from "sm_90a", "compute_90a" or "90a"; None if `text` is not such a name.  Plain names
    are parsed with str methods (a fresh process need not compile the regex on a cache hit)."""
    body = text[3:] if text.startswith("sm_") else text[8:] if text.startswith("compute_") else text
    if body.isascii() and body.isdigit():
        return body, ""
    import re

    m = re.fullmatch(_ARCH_PATTERN, text)
    return None if m is None else (m.group(1), m.group(2))


def normalize_arch(arch: Any, target: str) -> str:
    """"sm_90" (cubin, ltoir) or "compute_90" (ptx) from "sm_90", "90", 90, "9.0", (9, 0) or a Device.

    An architecture given by name must be one this NVRTC targets (else
    `Unsupported`, naming the ones it does).  One taken from a GPU (`arch=None`
    or a Device) may be newer than NVRTC: PTX is then made for the newest
    architecture NVRTC knows, which the driver compiles forward.
    """
    op = "nvrtcCompileProgram"
    from_device = arch is None or hasattr(arch, "compute_capability")
    if arch is None:
        arch = _current_arch()
    elif hasattr(arch, "compute_capability"):
        arch = arch.compute_capability
    if isinstance(arch, tuple) and len(arch) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                          for x in arch):
        digits, suffix = f"{arch[0]}{arch[1]}", ""
    else:
        text = str(arch).strip().replace(".", "") if not isinstance(arch, (bool, tuple)) else "?"
        parsed = _parse_arch(text)
        if parsed is None:
            raise _invalid(op, f"arch must look like 'sm_90', 90 or (9, 0), got {arch!r}")
        digits, suffix = parsed
    number = int(digits)
    version, archs, _ = _nvrtc_info()
    supported = ", ".join(map(str, archs))
    if target == "ptx" and number not in archs and from_device:
        usable = [a for a in archs if a <= number]
        if usable:
            return f"compute_{usable[-1]}"
    if number not in archs:
        kind = "PTX" if target == "ptx" else "LTO-IR" if target == "ltoir" else "CUBIN"
        raise _unsupported(
            op,
            f"NVRTC {version[0]}.{version[1]} cannot make {kind} for {'compute' if target == 'ptx' else 'sm'}_"
            f"{number} (it targets {supported}); name one of those, or install a matching nvidia-cuda-nvrtc",
        )
    return f"{'compute' if target == 'ptx' else 'sm'}_{number}{suffix}"


def _arch_token(arch: Any) -> Any:
    """What `arch` means, as a hashable value that costs nothing to compute twice (None: not cacheable)."""
    if arch is None:
        return ("cc", _current_arch())
    cc = getattr(arch, "compute_capability", None)
    if cc is not None:
        return ("cc", cc)
    if arch.__class__ in (str, int, tuple):
        return (arch.__class__, arch)
    return None


def _current_arch() -> tuple[int, int]:
    """Compute capability of the device whose context is current here, else of device 0."""
    from ._driver import call, driver, try_call
    from .errors import NotAvailable

    try:
        drv = driver()
    except NotAvailable as exc:
        raise NotAvailable(
            BACKEND, f"no GPU to take the target architecture from ({exc.reason})",
            fix="NVRTC needs no GPU: pass the architecture, e.g. Program(src).compile('ptx', arch='sm_90')",
            library=exc.library, searched=exc.searched, code=exc.code, code_name=exc.code_name,
        ) from None
    err, cudev = try_call("cuCtxGetDevice")
    if err:
        cudev = call("cuDeviceGet", 0)
    attr = drv.CUdevice_attribute
    major = int(call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cudev))
    minor = int(call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cudev))
    return major, minor


def source_text(source: Any, op: str) -> str:
    """`source` if it is CUDA C++ text NVRTC can take: a non-empty str with no NUL and no lone surrogate.

    NVRTC reads the source as a C string, so a NUL would silently end the
    program there; text that cannot be encoded as UTF-8 cannot reach it at all.
    """
    if source.__class__ is not str:
        raise _invalid(op, f"source must be a str of CUDA C++, got {type(source).__name__}")
    if not source or source.isspace():
        raise _invalid(op, "source must be a non-empty str of CUDA C++")
    where = source.find("\0")
    if where >= 0:
        line = source.count("\n", 0, where) + 1
        raise _invalid(op, f"the source holds a NUL character (line {line}); NVRTC would stop reading there")
    try:
        source.encode()
    except UnicodeEncodeError as exc:
        raise _invalid(op, f"the source is not encodable as UTF-8 (a lone surrogate {source[exc.start]!r} at "
                           f"character {exc.start})") from None
    return source


_TARGETS = ("cubin", "ptx", "ltoir")


class Program:
    """CUDA C++ source, its options and name expressions; `compile()` runs NVRTC (or hits the cache)."""

    def __init__(self, source: str, options: CompileOptions | None = None, name_expressions: Iterable[str] = (), *,
                 name: str = "ironaccel.cu", headers: Mapping[str, str] | None = None):
        op = "nvrtcCreateProgram"
        if source.__class__ is not str or not source.isascii() or not source or source.isspace() or "\0" in source:
            source = source_text(source, op)
        if options is None:
            option_args: tuple[str, ...] = ()  # what CompileOptions() gives, without importing it
        else:
            from .options import CompileOptions

            if not isinstance(options, CompileOptions):
                raise _invalid(op, f"options must be CompileOptions, got {type(options).__name__}")
            option_args = options._args()
        if name_expressions.__class__ is tuple:
            names = name_expressions
        elif isinstance(name_expressions, (str, bytes)) or not isinstance(name_expressions, Iterable):
            raise _invalid(op, f"name_expressions must be a sequence of str, got {name_expressions!r}")
        else:
            names = tuple(name_expressions)
        for n in names:
            if n.__class__ is not str or not n:
                raise _invalid(op, f"name expressions must be non-empty str, got {names!r}")
            _encodable(n, op, "name expression")
        header_items: tuple[tuple[str, str], ...] = ()
        if headers:
            if not isinstance(headers, Mapping):
                raise _invalid(op, "headers maps include names (str) to their source (str)")
            header_items = tuple(sorted(dict(headers).items()))
            if any(not isinstance(k, str) or not isinstance(v, str) for k, v in header_items):
                raise _invalid(op, "headers maps include names (str) to their source (str)")
            for k, v in header_items:
                _encodable(k, op, "header name")
                source_text(v, op)
        _encodable(name, op, "program name")
        self.source = source
        self._options = options
        self.name_expressions = names
        self.name = name
        self.headers = dict(header_items)
        self._inputs = (source, header_items, names, option_args, name)

    @property
    def options(self) -> CompileOptions:
        """The NVRTC options this program compiles with (`CompileOptions()`, NVRTC's defaults, when none were given)."""
        if self._options is None:
            from .options import CompileOptions

            self._options = CompileOptions()
        return self._options

    def compile(self, target: str = "cubin", arch: Any = None) -> ObjectCode:
        """Compile to "cubin" (default), "ptx" or "ltoir" for `arch` (default: the current device's).

        "ltoir" is NVRTC's link-time-optimisation IR (`-dlto`, relocatable): it
        cannot be loaded, only linked (`Linker`).
        """
        op = "nvrtcCompileProgram"
        if target not in _TARGETS:
            raise _invalid(op, f"target must be 'cubin', 'ptx' or 'ltoir', got {target!r}")
        # A compile that writes a precompiled header must run: a cached result would skip the file.
        enabled = cache.cache_enabled() and not _makes_pch(self._inputs[3])
        fast_key = None
        if enabled:
            token = _arch_token(arch)
            if token is not None:
                fast_key = (self._inputs, target, token)
                hit = cache.fast_get(fast_key)
                if hit is not None:
                    return hit
        info = _nvrtc_info()
        arch_name, args, key = self._key(target, arch, info)
        if enabled:
            found = self._lookup(key, target, arch_name, fast_key)
            if found is not None:
                return found
        nv = _nvrtc()  # the compile loads NVRTC: if it is not the one the record named, key on the loaded one
        loaded = _load_info()
        if loaded != info:
            global _info
            _info = loaded
            arch_name, args, key = self._key(target, arch, loaded)
            if enabled:
                found = self._lookup(key, target, arch_name, fast_key)
                if found is not None:
                    return found
        code = self._compile(nv, args, target, arch_name)
        if enabled:
            cache.memory_put(key, code)
            if fast_key is not None:
                cache.fast_put(fast_key, code.replace(cache="memory"))
            cache.disk_put(key, {"kind": target, "arch": arch_name, "names": dict(code.name_map), "log": code.log,
                                 "params": {k: list(v) for k, v in code.params.items()}}, code.code)
        return code

    def _key(self, target: str, arch: Any, info: tuple[tuple[int, int], tuple[int, ...], str]
             ) -> tuple[str, list[str], str]:
        arch_name = normalize_arch(arch, target)
        args = [*self._inputs[3], f"--gpu-architecture={arch_name}"]
        if target == "ltoir":
            args += ["-dlto", "--relocatable-device-code=true"]
        version, _, identity = info
        key = cache.cache_key(
            source=self.source, headers=[list(h) for h in self._inputs[1]], names=list(self.name_expressions),
            options=args, target=target, arch=arch_name, nvrtc=f"{version[0]}.{version[1]}", nvrtc_file=identity,
        )
        return arch_name, args, key

    def _lookup(self, key: str, target: str, arch_name: str, fast_key: Any) -> ObjectCode | None:
        hit = cache.memory_get(key)
        if hit is not None:
            code = hit.replace(cache="memory")
            if fast_key is not None:
                cache.fast_put(fast_key, code)
            return code
        entry = cache.disk_get(key)
        if entry is None:
            return None
        meta, payload = entry
        params = {str(k): tuple(str(t) for t in v) for k, v in dict(meta.get("params", {})).items()}
        code = ObjectCode(payload, target, arch_name, MappingProxyType(dict(meta.get("names", {}))),
                          str(meta.get("log", "")), cache="disk", params=MappingProxyType(params))
        cache.memory_put(key, code.replace(cache=None))
        if fast_key is not None:
            cache.fast_put(fast_key, code.replace(cache="memory"))
        return code

    def _compile(self, nv: ModuleType, args: list[str], target: str, arch_name: str) -> ObjectCode:
        code = self._compile_once(nv, args, target, arch_name)
        if code.pch == "heap_exhausted":  # as cuda.core does: once more with the heap NVRTC asked for
            code = self._compile_once(nv, args, target, arch_name)
            if code.pch == "heap_exhausted":
                code = code.replace(pch="failed")
        return code

    def _compile_once(self, nv: ModuleType, args: list[str], target: str, arch_name: str) -> ObjectCode:
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
                from .errors import CompileError

                raise CompileError(BACKEND, "nvrtcCompileProgram", log or _error_string(nv, err), int(err),
                                   getattr(err, "name", None))
            params: Mapping[str, tuple[str, ...]] = _EMPTY_PARAMS
            if target == "ltoir":
                buf = _output(nv, prog, "LTOIR")
            else:  # NVRTC makes the PTX for a CUBIN too: it carries the parameter types
                from .launch import ptx_param_types

                ptx = _output(nv, prog, "PTX")
                params = MappingProxyType(ptx_param_types(ptx))
                buf = ptx if target == "ptx" else _output(nv, prog, "CUBIN")
            names = {}
            for expr in self.name_expressions:
                err, lowered = nv.nvrtcGetLoweredName(prog, expr.encode())
                _check(nv, err, "nvrtcGetLoweredName", f"name expression {expr!r}")
                names[expr] = lowered.decode() if isinstance(lowered, bytes) else str(lowered)
            pch = _pch_outcome(nv, prog) if _makes_pch(args) else None
        finally:
            nv.nvrtcDestroyProgram(prog)
        return ObjectCode(bytes(buf), target, arch_name, MappingProxyType(names), log, cache=None, params=params,
                          pch=pch)


def _makes_pch(args: Any) -> bool:
    """Whether NVRTC options ask for a precompiled header to be created (--pch, --create-pch=FILE)."""
    return any(a == "--pch" or a.startswith("--create-pch") for a in args)


def _pch_outcome(nv: ModuleType, prog: Any) -> str:
    """nvrtcGetPCHCreateStatus as cuda.core names it; "heap_exhausted" after the heap was raised to what NVRTC asks
    (nvrtcSetPCHHeapSize), for one more try."""
    (status,) = nv.nvrtcGetPCHCreateStatus(prog)
    name = getattr(status, "name", "")
    if int(status) == 0:
        return "created"
    if name == "NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED":
        return "not_attempted"
    if name == "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED":
        err, need = nv.nvrtcGetPCHHeapSizeRequired(prog)
        if not int(err) and need:
            (err,) = nv.nvrtcSetPCHHeapSize(need)
            if not int(err):
                return "heap_exhausted"
    return "failed"


def _output(nv: ModuleType, prog: Any, what: str) -> bytes:
    """The compiled program's `what` ("PTX", "CUBIN" or "LTOIR"): nvrtcGet<what>Size, then nvrtcGet<what>."""
    err, size = getattr(nv, f"nvrtcGet{what}Size")(prog)
    _check(nv, err, f"nvrtcGet{what}Size")
    buf = b" " * size
    (err,) = getattr(nv, f"nvrtcGet{what}")(prog, buf)
    _check(nv, err, f"nvrtcGet{what}")
    return buf


def _encodable(text: str, op: str, what: str) -> None:
    if "\0" in text:
        raise _invalid(op, f"the {what} {text!r} holds a NUL character")
    try:
        text.encode()
    except UnicodeEncodeError:
        raise _invalid(op, f"the {what} {text!r} is not encodable as UTF-8") from None


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
        from .errors import CompileError

        message = _error_string(nv, err)
        raise CompileError(BACKEND, op, f"{what}: {message}" if what else message, int(err), getattr(err, "name", None))
