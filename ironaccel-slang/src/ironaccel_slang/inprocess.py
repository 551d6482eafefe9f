"""slangc's compile, run inside this process through Slang's compiler library (cffi), with one global session.

Why: every slangc process loads Slang's core module again, most of a cold compile's time; a global session kept
for the process pays that once, so a later cold compile is a small fraction of slangc's (ironaccel-slang/bench).

What: the library beside slangc (slangtorch's wheel ships ``libslang-compiler.so.<version>``), or the one at
``IRONACCEL_SLANG_LIBRARY``, is loaded with cffi; its global session is set up as slangc sets up its own (GLSL
on, the C++/CUDA preludes found from slangc's folder, slangc's folder a search path), and each compile is a
compile request in slangc's command-line mode given slangc's own arguments (``spProcessCommandLineArguments``),
so the library writes the very files -- code, reflection JSON, modules -- that slangc would.

`run` returns None, and the caller runs slangc, when ``IRONACCEL_SLANG_INPROCESS=0``, when the library is
missing, fails to load, lacks a function or is another build than slangc, or when the session cannot be made.
One compile at a time per session (a lock); a forked child makes its own session, never the parent's.
"""

from __future__ import annotations

import glob
import os
import threading
from dataclasses import dataclass
from typing import Any

import cffi

__all__ = ["ENV_INPROCESS", "ENV_LIBRARY", "find_library", "run"]

ENV_INPROCESS = "IRONACCEL_SLANG_INPROCESS"
ENV_LIBRARY = "IRONACCEL_SLANG_LIBRARY"

#: The library's names beside slangc, first found wins (Linux, macOS, Windows; the current and the older name).
_NAMES = ("libslang-compiler.so*", "libslang.so*", "libslang-compiler*.dylib", "libslang*.dylib",
          "slang-compiler.dll", "slang.dll")

_CDEF = """
typedef struct { uint32_t structureSize; uint32_t apiVersion; uint32_t minLanguageVersion; bool enableGLSL;
                 uint32_t reserved[16]; } SlangGlobalSessionDesc;
int32_t slang_createGlobalSession2(const SlangGlobalSessionDesc* desc, void** out);
const char* spGetBuildTagString(void);
void* spCreateCompileRequest(void* session);
void spDestroyCompileRequest(void* request);
void spAddSearchPath(void* request, const char* dir);
void spSetCommandLineCompilerMode(void* request);
void _Z28spSetCommandLineCompilerModePN5slang15ICompileRequestE(void* request);
int32_t spProcessCommandLineArguments(void* request, const char* const* args, int count);
int32_t spCompile(void* request);
const char* spGetDiagnosticOutput(void* request);
typedef void (*SetLanguagePrelude)(void* self, int32_t language, const char* text);
"""
_SET_LANGUAGE_PRELUDE = 11  # IGlobalSession's vtable: 3 of ISlangUnknown, then createSession ... setLanguagePrelude
_PRELUDES = ((5, "slang-cpp-prelude.h"), (6, "slang-cuda-prelude.h"))  # SLANG_SOURCE_LANGUAGE_CPP, _CUDA


@dataclass
class _Session:
    pid: int
    library: str
    version: str
    ffi: Any
    lib: Any
    session: Any
    command_line_mode: Any


_lock = threading.Lock()
_session: _Session | None = None
_refused: dict[tuple[int, str, str], str] = {}  # (pid, library, slangc's version) -> why it is not used


def _after_fork() -> None:
    global _lock, _session
    _lock, _session = threading.Lock(), None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def enabled() -> bool:
    return os.environ.get(ENV_INPROCESS, "1").strip().lower() not in ("0", "false", "no", "off")


def find_library(slangc: str) -> str | None:
    """The compiler library: IRONACCEL_SLANG_LIBRARY, else the one beside (the real path of) slangc; None if none."""
    explicit = os.environ.get(ENV_LIBRARY, "").strip()
    if explicit:
        return explicit if os.path.isfile(explicit) else None
    folder = os.path.dirname(os.path.realpath(slangc))
    for pattern in _NAMES:
        found = sorted(p for p in glob.glob(os.path.join(glob.escape(folder), pattern)) if os.path.isfile(p))
        if found:
            return found[0]
    return None


def run(slangc: str, version: str, args: list[str]) -> tuple[int, str] | None:
    """slangc `args` (without argv[0]) compiled in process: (Slang's result, < 0 a failure; the diagnostics).

    None: not in process (off, or no usable library beside `slangc` whose build tag is in `version`, slangc -v's
    output); the caller runs slangc.
    """
    if not enabled() or any("\0" in a for a in args):  # a NUL would cut a C string: slangc's path refuses it
        return None
    library = find_library(slangc)
    if library is None:
        return None
    with _lock:
        session = _open(slangc, version, library)
        if session is None:
            return None
        ffi, lib = session.ffi, session.lib
        request = lib.spCreateCompileRequest(session.session)
        if request == ffi.NULL:
            return None
        try:
            lib.spAddSearchPath(request, os.path.dirname(os.path.realpath(slangc)).encode())
            session.command_line_mode(request)
            keep = [ffi.new("char[]", a.encode()) for a in args]
            argv = ffi.new("const char*[]", keep)
            result = int(lib.spProcessCommandLineArguments(request, argv, len(keep)))
            if result >= 0:
                result = int(lib.spCompile(request))
            text = lib.spGetDiagnosticOutput(request)
            log = ffi.string(text).decode(errors="replace") if text != ffi.NULL else ""
        finally:
            lib.spDestroyCompileRequest(request)
    return result, log


def _open(slangc: str, version: str, library: str) -> _Session | None:
    """The process's global session for `library` (made now if needed; under _lock), or None if it cannot be."""
    global _session
    pid = os.getpid()
    if _session is not None and (_session.pid, _session.library, _session.version) == (pid, library, version):
        return _session
    if (pid, library, version) in _refused:
        return None
    try:
        _session = _make(slangc, version, library, pid)
    except _Refused as why:
        _refused[(pid, library, version)] = str(why)
        return None
    return _session


class _Refused(Exception):
    pass


def _make(slangc: str, version: str, library: str, pid: int) -> _Session:
    ffi = cffi.FFI()
    ffi.cdef(_CDEF)
    try:
        lib = ffi.dlopen(library, ffi.RTLD_NOW | ffi.RTLD_LOCAL)
    except OSError as exc:
        raise _Refused(f"cannot load {library}: {exc}") from None
    needed = ("slang_createGlobalSession2", "spGetBuildTagString", "spCreateCompileRequest", "spDestroyCompileRequest",
              "spAddSearchPath", "spProcessCommandLineArguments", "spCompile", "spGetDiagnosticOutput")
    try:
        for name in needed:
            getattr(lib, name)
    except AttributeError:
        raise _Refused(f"{library} lacks {name}") from None
    mode = None
    for name in ("spSetCommandLineCompilerMode", "_Z28spSetCommandLineCompilerModePN5slang15ICompileRequestE"):
        try:
            mode = getattr(lib, name)
            break
        except AttributeError:
            continue
    if mode is None:
        raise _Refused(f"{library} lacks spSetCommandLineCompilerMode")
    tag = ffi.string(lib.spGetBuildTagString()).decode(errors="replace").strip()
    if not tag or tag.lstrip("v") not in version.split():
        raise _Refused(f"{library} is Slang {tag!r}, slangc is {version!r}")
    desc = ffi.new("SlangGlobalSessionDesc*")
    desc.structureSize, desc.apiVersion, desc.minLanguageVersion = ffi.sizeof("SlangGlobalSessionDesc"), 0, 2025
    desc.enableGLSL = True
    out = ffi.new("void**")
    if lib.slang_createGlobalSession2(desc, out) < 0 or out[0] == ffi.NULL:
        raise _Refused(f"{library} could not make a global session")
    session = out[0]
    root = _prelude_root(os.path.dirname(os.path.realpath(slangc)))
    if root is not None:
        vtable = ffi.cast("void***", session)[0]
        set_prelude = ffi.cast("SetLanguagePrelude", vtable[_SET_LANGUAGE_PRELUDE])
        for language, header in _PRELUDES:
            for path in (os.path.join(root, "include", header), os.path.join(root, "prelude", header)):
                path = os.path.realpath(path).replace("\\", "/")
                if os.path.isfile(path):
                    set_prelude(session, language, f'#include "{path}"\n\n'.encode())
                    break
    return _Session(pid, library, version, ffi, lib, session, mode)


def _prelude_root(folder: str) -> str | None:
    """As slangc finds its preludes: the first folder up from its own with include/ or prelude/slang-cpp-prelude.h."""
    folder = os.path.realpath(folder)
    while True:
        if any(os.path.isfile(os.path.join(folder, sub, "slang-cpp-prelude.h")) for sub in ("include", "prelude")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
