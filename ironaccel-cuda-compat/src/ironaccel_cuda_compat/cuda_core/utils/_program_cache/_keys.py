"""`make_program_cache_key`: a SHA-256 over everything that decides a compile's bytes, per backend.

The rules are cuda.core's (a key for what `Program.compile` would refuse, or for what a cache hit
would get wrong, is an error): C++ goes through NVRTC (code must be `str`; options that write files
are refused; options that read files the key cannot see, or a source name with a directory that
`#include "..."` resolves against, need `extra_digest`), PTX through the linker (only the fields the
linker reads count, each in the form the linker writes it; under the driver's cuLink the fields it
ignores collapse and the ones it rejects are refused), NVVM through libNVVM (bytes allowed;
`use_libdevice` needs `extra_digest`).  The compiler versions go in through the probes below, module
functions so that a test can stand one in; a probe that fails mixes in the failure's class, so the
key is stable in a broken environment and never equal to a working one's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

_KEY_SCHEMA_VERSION = 1
_TARGETS = {"c++": ("ptx", "cubin", "ltoir"), "ptx": ("cubin", "ptx"), "nvvm": ("ptx", "ltoir")}
_EXTERNAL_CONTENT_OPTIONS = ("include_path", "pre_include", "pch", "use_pch", "pch_dir")
_SIDE_EFFECT_OPTIONS = ("create_pch", "time", "fdevice_time_trace")
_DRIVER_IGNORED_LINKER_FIELDS = frozenset({"ftz", "prec_div", "prec_sqrt", "fma"})
_DRIVER_LINKER_UNSUPPORTED_FIELDS = ("time", "ptxas_options", "split_compile")

Update = Callable[[str, bytes], None]


# -- probes (module functions: tests replace them) ------------------------------------------

def _driver_version() -> int:
    """cuDriverGetVersion's integer (the compat's cached query, put back in the driver's form)."""
    from ..._utils.version import driver_version

    major, minor, _ = driver_version()
    return major * 1000 + minor * 10


def _nvrtc_version() -> tuple[int, int]:
    from ironaccel_cuda.program import nvrtc_version

    major, minor = nvrtc_version()
    return int(major), int(minor)


def _linker_backend_and_version(use_driver: bool) -> tuple[str, str]:
    """The linker PTX goes through and its version: the driver's cuLink, or nvJitLink."""
    if use_driver:
        return "driver", str(_driver_version())
    from cuda.bindings import nvjitlink

    return "nvJitLink", str(nvjitlink.version())


def _nvvm_fingerprint() -> str:
    """libNVVM's library and IR versions, through the same loader the compile uses."""
    from ... import _program

    module = _program._get_nvvm_module()
    lib_major, lib_minor = module.version()
    major, minor, debug_major, debug_minor = module.ir_version()
    return f"lib={lib_major}.{lib_minor};ir={major}.{minor}.{debug_major}.{debug_minor}"


def _probe_failed(update: Update, label: str, exc: BaseException) -> None:
    update(f"{label}_probe_failed", type(exc).__name__.encode())


# -- option gates: what each field becomes on the compiler's command line -------------------

def _is_set(options: Any, name: str) -> bool:
    """Whether the compile would write `name` (the form-specific rules NVRTC's option writer uses)."""
    value = getattr(options, name, None)
    if value is None:
        return False
    if name == "pch":
        return bool(value)
    if name in ("include_path", "pre_include"):
        return isinstance(value, str) or (isinstance(value, Sequence) and len(value) > 0)
    return True


def _ptxas(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, str):
        return ("-Xptxas=" + v,)
    if isinstance(v, Sequence):
        return tuple(f"-Xptxas={s}" for s in v) or None
    return v


def _same(v: Any) -> Any:
    return v


def _tristate(v: Any) -> bool | None:
    return None if v is None else bool(v)


_LINKER_FIELDS: dict[str, Callable[[Any], Any]] = {
    "name": _same, "arch": _same, "max_register_count": _same,
    "time": lambda v: v is not None,
    "link_time_optimization": bool, "debug": bool, "lineinfo": bool,
    "ftz": _tristate, "prec_div": _tristate, "prec_sqrt": _tristate, "fma": _tristate,
    "split_compile": _same, "ptxas_options": _ptxas, "no_cache": lambda v: v is True,
}


def _use_driver_linker() -> tuple[bool | None, BaseException | None]:
    try:
        from ... import _linker

        return bool(_linker._decide_nvjitlink_or_driver()), None
    except Exception as exc:
        return None, exc


# -- the key ---------------------------------------------------------------------------------

def _code_bytes(code: Any, code_type: str) -> bytes:
    if isinstance(code, str):
        return code.encode("utf-8")
    if isinstance(code, (bytes, bytearray)):
        if code_type == "nvvm":
            return bytes(code)
        raise TypeError(f"make_program_cache_key: code must be str for code_type={code_type!r}; bytes are accepted "
                        "only for code_type='nvvm'")
    raise TypeError(f"make_program_cache_key: code must be str or bytes, got {type(code).__name__}")


def _name_tags(name_expressions: Any) -> tuple[bytes, ...]:
    """Sorted and typed: order does not matter, "f" and b"f" differ (they are different symbol_mapping keys)."""
    tags = []
    for n in name_expressions:
        if isinstance(n, bytes):
            tags.append(b"b:" + n)
        elif isinstance(n, str):
            tags.append(b"s:" + n.encode("utf-8"))
        else:
            raise TypeError("make_program_cache_key: name_expressions elements must be str or bytes (they become "
                            f"dict keys), got {type(n).__name__}")
    return tuple(sorted(tags))


def _check_nvrtc(options: Any, extra_digest: bytes | None) -> None:
    side = [n for n in _SIDE_EFFECT_OPTIONS if _is_set(options, n)]
    if side:
        raise ValueError(f"make_program_cache_key: options with compile-time side effects ({', '.join(side)}) "
                         "cannot be cached (a hit skips the compile); compile without cache=")
    if getattr(options, "extra_sources", None) is not None:
        raise ValueError("make_program_cache_key: extra_sources is only valid for code_type='nvvm'")
    if extra_digest is None:
        external = [n for n in _EXTERNAL_CONTENT_OPTIONS if _is_set(options, n)]
        if external:
            raise ValueError(f"make_program_cache_key: options that read files the key cannot see "
                             f"({', '.join(external)}) need extra_digest= (a digest of those files)")
        name = getattr(options, "name", None)
        if isinstance(name, str) and ("/" in name or "\\" in name):
            raise ValueError(f"make_program_cache_key: options.name={name!r} has a directory component, which NVRTC "
                             "resolves quoted #include against; pass extra_digest= covering those headers")


def make_program_cache_key(*, code: Any, code_type: str, options: Any, target_type: str,
                           name_expressions: Sequence[Any] = (), extra_digest: bytes | None = None) -> bytes:
    """A digest of everything that decides the compiled bytes: code, options, target and compiler versions."""
    from ..._program import ProgramOptions

    code_type = code_type.lower() if isinstance(code_type, str) else code_type
    target_type = target_type.lower() if isinstance(target_type, str) else target_type
    if code_type not in _TARGETS:
        raise ValueError(f"make_program_cache_key: {code_type!r} is not a valid SourceCodeType (one of "
                         f"{', '.join(_TARGETS)})")
    if target_type not in _TARGETS[code_type]:
        raise ValueError(f"make_program_cache_key: target_type={target_type!r} is not valid for "
                         f"code_type={code_type!r} (supported: {sorted(_TARGETS[code_type])})")
    if not isinstance(options, ProgramOptions):
        raise TypeError("make_program_cache_key: options must be a ProgramOptions")

    h = hashlib.sha256(usedforsecurity=False)

    def update(label: str, payload: bytes) -> None:
        h.update(label.encode("ascii") + len(payload).to_bytes(8, "big") + payload)

    update("schema", f"ironaccel-{_KEY_SCHEMA_VERSION}".encode())
    names: tuple[bytes, ...] | None = None
    if code_type == "c++":
        _check_nvrtc(options, extra_digest)
        data = _code_bytes(code, code_type)
        opts = options.as_bytes("nvrtc", target_type)
        names = _name_tags(name_expressions)
        try:
            major, minor = _nvrtc_version()
            update("nvrtc", f"{major}.{minor}".encode())
        except Exception as exc:
            _probe_failed(update, "nvrtc", exc)
    elif code_type == "ptx":
        if getattr(options, "extra_sources", None) is not None:
            raise ValueError("make_program_cache_key: extra_sources is only valid for code_type='nvvm'")
        use_driver, failure = _use_driver_linker()
        if use_driver:
            bad = [n for n in _DRIVER_LINKER_UNSUPPORTED_FIELDS if getattr(options, n, None) is not None]
            if bad:
                raise ValueError(f"make_program_cache_key: the driver linker (cuLink) does not support "
                                 f"{', '.join(bad)}; Program.compile would refuse these options")
        data = _code_bytes(code, code_type)
        opts = [(f"{n}=<driver-ignored>" if use_driver and n in _DRIVER_IGNORED_LINKER_FIELDS
                 else f"{n}={gate(getattr(options, n, None))!r}").encode() for n, gate in _LINKER_FIELDS.items()]
        if use_driver is None:
            assert failure is not None
            _probe_failed(update, "linker", failure)
        else:
            try:
                backend, version = _linker_backend_and_version(use_driver)
                update("linker_backend", backend.encode())
                update("linker_version", version.encode())
            except Exception as exc:
                _probe_failed(update, "linker", exc)
    else:
        if extra_digest is None and getattr(options, "use_libdevice", None):
            raise ValueError("make_program_cache_key: use_libdevice=True needs extra_digest= (a digest of the "
                             "libdevice bitcode linked in)")
        data = _code_bytes(code, code_type)
        opts = options.as_bytes("nvvm", target_type)
        try:
            update("nvvm", _nvvm_fingerprint().encode())
        except Exception as exc:
            _probe_failed(update, "nvvm", exc)
        for name, src in options._prepare_extra_sources_bytes() or ():
            update("extra_source_name", name)
            update("extra_source_code", src)
        if getattr(options, "use_libdevice", None):
            update("use_libdevice", b"1")
    update("code_type", code_type.encode())
    update("target_type", target_type.encode())
    update("code", data)
    update("option_count", str(len(opts)).encode())
    for opt in opts:
        update("option", bytes(opt))
    if names is not None:
        update("names_count", str(len(names)).encode())
        for n in names:
            update("name", n)
    if getattr(options, "name", None) is not None:
        update("options_name", str(options.name).encode())
    if extra_digest is not None:
        update("extra_digest", bytes(extra_digest))
    return h.digest()
