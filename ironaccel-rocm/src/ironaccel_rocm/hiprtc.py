"""hipRTC, the HIP runtime compiler, through ctypes.

Why ctypes and not hip-python's `hiprtc` module: hip-python (6.x and later)
dlopens a separate ``libhiprtc.so``, which exists only since ROCm 6; in ROCm 5
(Debian 12's packages, for one) hipRTC lives inside ``libamdhip64``.  Calling
the eight C functions directly works with both layouts and needs no GPU, no
driver and no binding.

Where it is looked for, in order: ``IRONACCEL_HIPRTC_LIBRARY`` (a file or
folders), ``$ROCM_PATH/lib``, ``$HIP_PATH/lib``, ``/opt/rocm/lib``, the system
folders and the dynamic loader; first ``libhiprtc.so*``, then ``libamdhip64.so*``
if it exports ``hiprtcCreateProgram``.

The AMD code-object manager (``libamd_comgr``), which hipRTC compiles through,
is asked for the ISA names it knows and whether a target ID (``gfx90a:xnack+``)
is valid: hipRTC 5.2 aborts the process on an unknown ``--offload-arch`` or a
target feature the GPU lacks (``gfx1030:sramecc+``), so `supported_isas` and
`valid_target` let the compiler reject one with a typed error first.

hipRTC 5.2 is not thread-safe: concurrent hiprtcCompileProgram calls crash
the process or return another program's code.  `COMPILE_LOCK` serializes
every program's create-compile-destroy sequence.
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass

from ironaccel.errors import InvalidArgument, NotAvailable
from ironaccel.probing import load_library

BACKEND = "rocm"
ENV_LIBRARY = "IRONACCEL_HIPRTC_LIBRARY"

HIPRTC_NAMES = ("libhiprtc.so", "libhiprtc.so.7", "libhiprtc.so.6")
AMDHIP_NAMES = ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5")
COMGR_NAMES = ("libamd_comgr.so", "libamd_comgr.so.3", "libamd_comgr.so.2")

#: hiprtcResult, from hip/hiprtc.h.
RESULT_NAMES: dict[int, str] = {
    0: "HIPRTC_SUCCESS",
    1: "HIPRTC_ERROR_OUT_OF_MEMORY",
    2: "HIPRTC_ERROR_PROGRAM_CREATION_FAILURE",
    3: "HIPRTC_ERROR_INVALID_INPUT",
    4: "HIPRTC_ERROR_INVALID_PROGRAM",
    5: "HIPRTC_ERROR_INVALID_OPTION",
    6: "HIPRTC_ERROR_COMPILATION",
    7: "HIPRTC_ERROR_BUILTIN_OPERATION_FAILURE",
    8: "HIPRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
    9: "HIPRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
    10: "HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
    11: "HIPRTC_ERROR_INTERNAL_ERROR",
    100: "HIPRTC_ERROR_LINKING",
}


def result_name(code: int) -> str:
    """The symbolic name of a hiprtcResult (``HIPRTC_ERROR_<code>`` if unknown)."""
    return RESULT_NAMES.get(code, f"HIPRTC_ERROR_{code}")


class _MetadataNode(ctypes.Structure):
    _fields_ = [("handle", ctypes.c_uint64)]  # amd_comgr_metadata_node_t


@dataclass(frozen=True)
class Hiprtc:
    """The loaded hipRTC functions and where they came from."""

    lib: ctypes.CDLL
    path: str
    version: tuple[int, int]
    supported_isas: frozenset[str] | None  # None: comgr could not be asked
    comgr: ctypes.CDLL | None = None

    def valid_target(self, target: str) -> bool | None:
        """Whether the code-object manager accepts `target` (``gfx90a:sramecc+``); None if it cannot be asked."""
        ask = getattr(self.comgr, "amd_comgr_get_isa_metadata", None)
        destroy = getattr(self.comgr, "amd_comgr_destroy_metadata", None)
        if not isinstance(target, str):
            raise InvalidArgument(BACKEND, "amd_comgr_get_isa_metadata", detail=(
                f"the target must be a str like 'gfx90a:xnack+', got {type(target).__name__} {target!r}"))
        if ask is None or destroy is None:
            return None
        try:
            name = f"amdgcn-amd-amdhsa--{target}".encode()
        except UnicodeEncodeError:
            return False  # no target ID holds a lone surrogate
        if b"\0" in name:
            return False  # comgr would read only up to the NUL and answer for another target
        node = _MetadataNode()
        if ask(name, ctypes.byref(node)) != 0:
            return False
        destroy(node)
        return True


_lock = threading.Lock()
_loaded: Hiprtc | None = None

#: Held around every hipRTC program, from hiprtcCreateProgram to hiprtcDestroyProgram.
COMPILE_LOCK = threading.Lock()


def _rocm_dirs() -> list[str]:
    dirs = [os.path.join(os.environ[v], "lib") for v in ("ROCM_PATH", "HIP_PATH") if os.environ.get(v)]
    return [*dirs, "/opt/rocm/lib"]


def load() -> Hiprtc:
    """Load hipRTC once per process; NotAvailable lists every place searched."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = _load()
        return _loaded


def reset() -> None:
    """Forget the loaded library (tests that change IRONACCEL_HIPRTC_LIBRARY)."""
    global _loaded
    with _lock:
        _loaded = None


def _load() -> Hiprtc:
    fix = f"install ROCm's hipRTC (libhiprtc, or libamdhip64 on ROCm 5), or point {ENV_LIBRARY} at it"
    symbols = tuple(_SIGNATURES)
    try:
        found = load_library(BACKEND, HIPRTC_NAMES, env_var=ENV_LIBRARY, extra_dirs=_rocm_dirs(), fix=fix,
                             symbols=symbols)
    except NotAvailable as first:
        explicit = os.environ.get(ENV_LIBRARY, "")
        if explicit and os.path.isfile(explicit):
            raise  # the file named is the answer: it failed to load or is not a hipRTC
        try:  # ROCm 5 has hipRTC inside libamdhip64
            found = load_library(BACKEND, AMDHIP_NAMES, env_var=ENV_LIBRARY, extra_dirs=_rocm_dirs(), fix=fix,
                                 symbols=symbols)
        except NotAvailable as second:
            searched = [*first.searched, *second.searched]
            unusable = "".join(f"; {e.reason}" for e in (first, second) if "not usable" in e.reason)
            raise NotAvailable(
                BACKEND,
                f"hipRTC not found: neither {' / '.join(HIPRTC_NAMES)} nor {' / '.join(AMDHIP_NAMES)} "
                f"with hipRTC could be loaded (searched {', '.join(searched)}){unusable}",
                fix=fix,
                library=HIPRTC_NAMES[0],
                searched=searched,
            ) from None
    lib = found.handle
    _declare(lib)
    major, minor = ctypes.c_int(), ctypes.c_int()
    ok = lib.hiprtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0
    version = (major.value, minor.value) if ok else (0, 0)
    comgr = _comgr(os.path.dirname(found.path))
    return Hiprtc(lib, found.path, version, _ask_comgr(comgr) if comgr else None, comgr)


_vp, _cp, _sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
#: The hipRTC functions the compiler calls, with their argument types.
_SIGNATURES: dict[str, list[type]] = {
    "hiprtcCreateProgram": [ctypes.POINTER(_vp), _cp, _cp, ctypes.c_int, ctypes.POINTER(_cp), ctypes.POINTER(_cp)],
    "hiprtcCompileProgram": [_vp, ctypes.c_int, ctypes.POINTER(_cp)],
    "hiprtcGetProgramLogSize": [_vp, ctypes.POINTER(_sz)],
    "hiprtcGetProgramLog": [_vp, ctypes.c_char_p],
    "hiprtcGetCodeSize": [_vp, ctypes.POINTER(_sz)],
    "hiprtcGetCode": [_vp, ctypes.c_char_p],
    "hiprtcDestroyProgram": [ctypes.POINTER(_vp)],
    "hiprtcVersion": [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)],
}


def _declare(lib: ctypes.CDLL) -> None:
    for name, argtypes in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int


def _comgr(near: str) -> ctypes.CDLL | None:
    """libamd_comgr beside hipRTC or on the loader's path, with its metadata calls declared; None if absent."""
    for name in COMGR_NAMES:
        for candidate in (os.path.join(near, name), name):
            try:
                comgr = ctypes.CDLL(candidate)
            except OSError:
                continue
            for fn, argtypes in (("amd_comgr_get_isa_metadata", [ctypes.c_char_p, ctypes.POINTER(_MetadataNode)]),
                                 ("amd_comgr_destroy_metadata", [_MetadataNode])):
                if hasattr(comgr, fn):
                    getattr(comgr, fn).argtypes = argtypes
                    getattr(comgr, fn).restype = ctypes.c_int
            return comgr
    return None


def _ask_comgr(comgr: ctypes.CDLL) -> frozenset[str] | None:
    """GPU names (``gfx90a``) that the code-object manager can target, or None."""
    try:
        return _isa_names(comgr)
    except (AttributeError, OSError):
        return None


def _isa_names(comgr: ctypes.CDLL) -> frozenset[str] | None:
    count = ctypes.c_size_t()
    comgr.amd_comgr_get_isa_count.argtypes = [ctypes.POINTER(ctypes.c_size_t)]
    comgr.amd_comgr_get_isa_name.argtypes = [ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p)]
    if comgr.amd_comgr_get_isa_count(ctypes.byref(count)) != 0:
        return None
    isas = set()
    for index in range(count.value):
        name = ctypes.c_char_p()
        if comgr.amd_comgr_get_isa_name(index, ctypes.byref(name)) == 0 and name.value:
            isas.add(name.value.decode().rsplit("-", 1)[-1])  # amdgcn-amd-amdhsa--gfx90a -> gfx90a
    return frozenset(isas) or None
