"""Slang compiled inside this process through Slang's compiler library (cffi) and its COM API, as slangpy does.

Why: every slangc process loads Slang's core module again, most of a cold compile's time, and even in process a
compile request in slangc's command-line mode makes a new linkage and runs the whole front end each time.  Here one
global session is kept for the process and one `slang::ISession` per (target, options), so a compile is the
front end of one new module plus the back end of one entry point.

What: the library beside slangc (slangtorch's wheel ships ``libslang-compiler.so.<version>``), or the one at
``IRONACCEL_SLANG_LIBRARY``, is loaded with cffi; its global session is set up as slangc sets up its own (GLSL on,
the C++/CUDA preludes found from slangc's folder).  A session is made from slangc's own options for the target
(``IGlobalSession::parseCommandLineArguments``, so every option means what it means to slangc) with slangc's
folder a search path.  Each compile then loads the source as a module named by a hash of its text (a module
loaded before in that session is reused), finds the entry point as a compute entry point, specializes it
(``-specialize``), composes it with the module and the link-time constants module (a second module of the same
session), links, and asks for the entry point's code and the program layout, whose reflection JSON is Slang's own
emitter's (``spReflection_ToJson``, the function behind slangc's ``-reflection-json``).

The interfaces are COM: each method is called through its slot in the object's vtable (the slots below, of
slang.h at the library's version; COM interfaces only ever append methods).  Every object this module is given
is released (``ISlangUnknown::release``), diagnostics blobs included; modules are the session's own (Slang hands
them out without a reference) and go with their session.  A session keeps every module it loaded, so it is
replaced by a fresh one after `MODULES_PER_SESSION` modules, and at most `SESSIONS` sessions are kept.

`compile` returns None, and the caller runs slangc, when ``IRONACCEL_SLANG_INPROCESS=0``, when the library is
missing, fails to load, lacks a function or is another build than slangc, when the global session cannot be made,
or when the options are not ones a session takes as slangc would (an input file, an output, an entry point: see
`_servable`) or Slang's parser refuses them (slangc then reports the error as it always did).  One compile at a
time for the global session and all its sessions (a lock: Slang asks that objects made from one global session
be used by one thread at a time, and its JSON emitter keeps a global); a forked child makes its own global
session, never touching the parent's.
"""

from __future__ import annotations

import glob
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import cffi

from ironaccel.diskcache import sha256

__all__ = ["ENV_INPROCESS", "ENV_LIBRARY", "MODULES_PER_SESSION", "SESSIONS", "Refused", "enabled", "find_library",
           "compile"]

ENV_INPROCESS = "IRONACCEL_SLANG_INPROCESS"
ENV_LIBRARY = "IRONACCEL_SLANG_LIBRARY"

#: Modules a session loads (each kept by Slang until the session goes) before the next compile makes a fresh one.
MODULES_PER_SESSION = 128
#: Sessions kept at once (one per target and options); the least recently used goes first.
SESSIONS = 8

#: The library's names beside slangc, first found wins (Linux, macOS, Windows; the current and the older name).
_NAMES = ("libslang-compiler.so*", "libslang.so*", "libslang-compiler*.dylib", "libslang*.dylib",
          "slang-compiler.dll", "slang.dll")

_CDEF = """
typedef struct { uint32_t structureSize; uint32_t apiVersion; uint32_t minLanguageVersion; bool enableGLSL;
                 uint32_t reserved[16]; } SlangGlobalSessionDesc;
typedef struct { int32_t kind; int32_t intValue0; int32_t intValue1; const char* stringValue0;
                 const char* stringValue1; } CompilerOptionValue;
typedef struct { int32_t name; CompilerOptionValue value; } CompilerOptionEntry;
typedef struct { size_t structureSize; int32_t format; uint32_t profile; uint32_t flags; uint32_t floatingPointMode;
                 uint32_t lineDirectiveMode; bool forceGLSLScalarBufferLayout;
                 const CompilerOptionEntry* compilerOptionEntries; uint32_t compilerOptionEntryCount; } TargetDesc;
typedef struct { size_t structureSize; const TargetDesc* targets; int64_t targetCount; uint32_t flags;
                 uint32_t defaultMatrixLayoutMode; const char* const* searchPaths; int64_t searchPathCount;
                 const void* preprocessorMacros; int64_t preprocessorMacroCount; void* fileSystem;
                 bool enableEffectAnnotations; bool allowGLSLSyntax; const CompilerOptionEntry* compilerOptionEntries;
                 uint32_t compilerOptionEntryCount; bool skipSPIRVValidation; } SessionDesc;
typedef struct { int32_t kind; const char* expr; } SpecializationArg;

int32_t slang_createGlobalSession2(const SlangGlobalSessionDesc* desc, void** out);
const char* spGetBuildTagString(void);
int32_t spReflection_ToJson(void* reflection, void* request, void** outBlob);

typedef uint32_t (*Release)(void* self);
typedef const void* (*BlobPointer)(void* self);
typedef size_t (*BlobSize)(void* self);
typedef int32_t (*CreateSession)(void* self, const SessionDesc* desc, void** out);
typedef void (*SetLanguagePrelude)(void* self, int32_t language, const char* text);
typedef void (*GetLanguagePrelude)(void* self, int32_t language, void** outBlob);
typedef int32_t (*ParseArguments)(void* self, int argc, const char* const* argv, SessionDesc* out, void** outAux);
typedef void* (*LoadModuleFromSourceString)(void* self, const char* name, const char* path, const char* source,
                                            void** outDiagnostics);
typedef int32_t (*CreateComposite)(void* self, void* const* components, int64_t count, void** out,
                                   void** outDiagnostics);
typedef int32_t (*FindAndCheckEntryPoint)(void* self, const char* name, uint32_t stage, void** out,
                                          void** outDiagnostics);
typedef int32_t (*Specialize)(void* self, const SpecializationArg* args, int64_t count, void** out,
                              void** outDiagnostics);
typedef int64_t (*SpecializationParamCount)(void* self);
typedef int32_t (*Link)(void* self, void** out, void** outDiagnostics);
typedef void* (*GetLayout)(void* self, int64_t target, void** outDiagnostics);
typedef int32_t (*GetEntryPointCode)(void* self, int64_t entryPoint, int64_t target, void** outCode,
                                     void** outDiagnostics);
"""

# vtable slots (slang.h of 2026.14: ISlangUnknown's queryInterface, addRef, release come first in each)
_RELEASE = 2                                   # ISlangUnknown::release
_BLOB_POINTER, _BLOB_SIZE = 3, 4               # ISlangBlob::getBufferPointer, getBufferSize
_CREATE_SESSION = 3                            # IGlobalSession::createSession
_SET_LANGUAGE_PRELUDE = 11                     # IGlobalSession::setLanguagePrelude
_GET_LANGUAGE_PRELUDE = 12                     # IGlobalSession::getLanguagePrelude
_PARSE_ARGUMENTS = 27                          # IGlobalSession::parseCommandLineArguments
_CREATE_COMPOSITE = 6                          # ISession::createCompositeComponentType
_LOAD_MODULE_FROM_SOURCE_STRING = 20           # ISession::loadModuleFromSourceString
_GET_LAYOUT = 4                                # IComponentType::getLayout
_SPECIALIZATION_PARAM_COUNT = 5                # IComponentType::getSpecializationParamCount
_GET_ENTRY_POINT_CODE = 6                      # IComponentType::getEntryPointCode
_SPECIALIZE = 9                                # IComponentType::specialize
_LINK = 10                                     # IComponentType::link
_FIND_AND_CHECK_ENTRY_POINT = 25               # IModule::findAndCheckEntryPoint

_STAGE_COMPUTE = 6                             # SLANG_STAGE_COMPUTE
_SPECIALIZE_EXPR = 2                           # SpecializationArg::Kind::Expr
_MACRO_DEFINE = 0                              # CompilerOptionName::MacroDefine
_COLUMN_MAJOR = 2                              # SLANG_MATRIX_LAYOUT_COLUMN_MAJOR: slangc's (SessionDesc's is row-major)
_CUDA = 6                                      # SLANG_SOURCE_LANGUAGE_CUDA
_PRELUDES = ((5, "slang-cpp-prelude.h"), (_CUDA, "slang-cuda-prelude.h"))  # SLANG_SOURCE_LANGUAGE_CPP, _CUDA
_END = "IRONACCEL_OPTIONS_END"                 # a define after the options: present only where all were parsed

#: slangc options that name inputs, outputs or entry points, or change what a compile makes: slangc runs them.
_NOT_SERVED = frozenset((
    "-entry", "-stage", "-target", "-o", "-r", "-reflection-json", "-module-name", "-lang", "-emit-ir", "-E", "-h",
    "-help", "-v", "-version", "-output-includes", "-depfile", "-pass-through", "-separate-debug-info",
    "-separate-debug-info-output", "-embed-downstream-ir", "-save-core-module", "-load-core-module",
    "-save-core-module-bin-source", "-save-glsl-module-bin-source", "-dump-repro", "-load-repro",
    "-load-repro-directory", "-extract-repro", "-repro-file-system", "-file-system", "-archive-type", "-no-codegen",
    "-skip-codegen", "-preprocessor-output", "-doc", "-ir-compression", "-source-embed-style", "-source-embed-name",
    "-source-embed-language", "-dump-ir", "-dump-ast", "-dump-intermediates", "-dump-intermediate-prefix",
    "-dump-module", "-get-module-info", "-heterogeneous", "-coverage-manifest-output",
))
#: slangc options that take one value (the next argument; from slangc's option table) and that a session takes as
#: slangc does.  An option taking more values leaves one looking like an input file: slangc runs it.
_WITH_VALUE = frozenset((
    "-D", "-I", "-bindless-space-index", "-capability", "-conformance", "-denorm-mode-fp16", "-denorm-mode-fp32",
    "-denorm-mode-fp64", "-diagnostic-color", "-floating-point-mode", "-fp-mode", "-line-directive-mode", "-profile",
    "-spirv-resource-heap-stride", "-spirv-sampler-heap-stride", "-std", "-warnings-as-errors", "-warnings-disable",
))


class Refused(Exception):
    """Slang refused the compile: its diagnostics and its result code."""

    def __init__(self, log: str, result: int):
        super().__init__(log)
        self.log, self.result = log, result


@dataclass
class _Session:
    """One slang::ISession (one target and its options) and the modules it loaded, by name."""

    handle: Any
    modules: dict[str, Any] = field(default_factory=dict)
    loads: int = 0


@dataclass
class _Global:
    """The process's global session of one library build, and its sessions."""

    pid: int
    library: str
    version: str
    search_path: bytes
    ffi: Any
    lib: Any
    handle: Any
    cuda_prelude: str
    sessions: OrderedDict[tuple[str, tuple[str, ...]], _Session] = field(default_factory=OrderedDict)
    methods: dict[tuple[int, int, str], Any] = field(default_factory=dict)

    def method(self, obj: Any, slot: int, signature: str) -> Any:
        """`obj`'s vtable method at `slot`, cast to `signature` (kept per vtable)."""
        table = self.ffi.cast("void***", obj)[0]
        key = (int(self.ffi.cast("uintptr_t", table)), slot, signature)
        found = self.methods.get(key)
        if found is None:
            found = self.methods[key] = self.ffi.cast(signature, table[slot])
        return found

    def release(self, obj: Any) -> None:
        if obj != self.ffi.NULL:
            self.method(obj, _RELEASE, "Release")(obj)

    def take(self, blob: Any) -> bytes:
        """The bytes of a blob Slang handed over (b"" for none), releasing it."""
        if blob == self.ffi.NULL:
            return b""
        try:
            size = int(self.method(blob, _BLOB_SIZE, "BlobSize")(blob))
            pointer = self.method(blob, _BLOB_POINTER, "BlobPointer")(blob)
            return bytes(self.ffi.buffer(pointer, size)) if size and pointer != self.ffi.NULL else b""
        finally:
            self.release(blob)


_lock = threading.Lock()
_global: _Global | None = None
_refused: dict[tuple[int, str, str], str] = {}  # (pid, library, slangc's version) -> why it is not used


def _after_fork() -> None:
    global _lock, _global
    _lock, _global = threading.Lock(), None  # the parent's objects are left alone: another thread may hold them


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


def compile(slangc: str, version: str, source: str, entry: str, target: str, options: tuple[str, ...],
            constants_module: str | None) -> tuple[bytes, str] | None:
    """`entry` of `source` compiled for slangc's `target` with slangc's `options` (and the link-time constants
    module): (the code, the reflection JSON text).

    Raises Refused with Slang's diagnostics where Slang refuses the source or the entry point.  None: not in
    process (off, no usable library beside `slangc` whose build tag is in `version`, slangc -v's output, or options
    a session does not take as slangc does); the caller runs slangc.
    """
    if not enabled() or any("\0" in s for s in (source, entry, constants_module or "", *options)):
        return None  # a NUL would cut a C string; the caller refuses it
    served = _servable(options)
    if served is None:
        return None
    session_options, specialization = served
    library = find_library(slangc)
    if library is None:
        return None
    with _lock:
        state = _open(slangc, version, library)
        if state is None:
            return None
        session = _session(state, target, session_options)
        if session is None:
            return None
        return _compile(state, session, source, entry, specialization, constants_module)


def cuda_prelude(slangc: str, version: str) -> str | None:
    """The text Slang puts before the CUDA code it writes (its CUDA prelude), where the library is in use."""
    library = find_library(slangc) if enabled() else None
    if library is None:
        return None
    with _lock:
        state = _open(slangc, version, library)
        return None if state is None else state.cuda_prelude


def _servable(options: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(the options for the session, the -specialize arguments in order), or None where slangc must run them:
    an option of `_NOT_SERVED`, or an argument that is no option's value (an input file)."""
    kept: list[str] = []
    specialize: list[str] = []
    i = 0
    while i < len(options):
        arg = options[i]
        if arg == "-specialize":
            while True:
                if i + 1 >= len(options):
                    return None
                specialize.append(options[i + 1])
                i += 2
                if i < len(options) and options[i] == ",":
                    continue
                break
            continue
        if not arg.startswith("-") or arg in _NOT_SERVED:
            return None
        kept.append(arg)
        if arg in _WITH_VALUE:
            if i + 1 >= len(options):
                return None
            kept.append(options[i + 1])
            i += 1
        i += 1
    return tuple(kept), tuple(specialize)


def _open(slangc: str, version: str, library: str) -> _Global | None:
    """The process's global session for `library` (made now if needed; under _lock), or None if it cannot be."""
    global _global
    pid = os.getpid()
    if _global is not None and (_global.pid, _global.library, _global.version) == (pid, library, version):
        return _global
    if (pid, library, version) in _refused:
        return None
    try:
        made = _make(slangc, version, library, pid)
    except _NotUsable as why:
        _refused[(pid, library, version)] = str(why)
        return None
    if _global is not None and _global.pid == pid:
        _close(_global)
    _global = made
    return _global


class _NotUsable(Exception):
    pass


def _make(slangc: str, version: str, library: str, pid: int) -> _Global:
    ffi = cffi.FFI()
    ffi.cdef(_CDEF)
    try:
        lib = ffi.dlopen(library, ffi.RTLD_NOW | ffi.RTLD_LOCAL)
    except OSError as exc:
        raise _NotUsable(f"cannot load {library}: {exc}") from None
    for name in ("slang_createGlobalSession2", "spGetBuildTagString", "spReflection_ToJson"):
        try:
            getattr(lib, name)
        except AttributeError:
            raise _NotUsable(f"{library} lacks {name}") from None
    tag = ffi.string(lib.spGetBuildTagString()).decode(errors="replace").strip()
    if not tag or tag.lstrip("v") not in version.split():
        raise _NotUsable(f"{library} is Slang {tag!r}, slangc is {version!r}")
    desc = ffi.new("SlangGlobalSessionDesc*")
    desc.structureSize, desc.apiVersion, desc.minLanguageVersion = ffi.sizeof("SlangGlobalSessionDesc"), 0, 2025
    desc.enableGLSL = True
    out = ffi.new("void**")
    if lib.slang_createGlobalSession2(desc, out) < 0 or out[0] == ffi.NULL:
        raise _NotUsable(f"{library} could not make a global session")
    folder = os.path.dirname(os.path.realpath(slangc))
    state = _Global(pid, library, version, folder.encode(), ffi, lib, out[0], "")
    root = _prelude_root(folder)
    if root is not None:
        set_prelude = state.method(state.handle, _SET_LANGUAGE_PRELUDE, "SetLanguagePrelude")
        for language, header in _PRELUDES:
            for path in (os.path.join(root, "include", header), os.path.join(root, "prelude", header)):
                path = os.path.realpath(path).replace("\\", "/")
                if os.path.isfile(path):
                    set_prelude(state.handle, language, f'#include "{path}"\n\n'.encode())
                    break
    blob = ffi.new("void**")
    state.method(state.handle, _GET_LANGUAGE_PRELUDE, "GetLanguagePrelude")(state.handle, _CUDA, blob)
    state.cuda_prelude = state.take(blob[0]).decode(errors="replace")
    return state


def _close(state: _Global) -> None:
    for session in state.sessions.values():
        state.release(session.handle)
    state.sessions.clear()
    state.release(state.handle)


def _session(state: _Global, target: str, options: tuple[str, ...]) -> _Session | None:
    """The session for (target, options), made now where there is none or the one there loaded its share of
    modules; None where Slang's parser does not take the options (slangc then runs and says why)."""
    key = (target, options)
    found = state.sessions.get(key)
    if found is not None:
        if found.loads < MODULES_PER_SESSION:
            state.sessions.move_to_end(key)
            return found
        del state.sessions[key]
        state.release(found.handle)
    ffi = state.ffi
    args = [ffi.new("char[]", a.encode()) for a in ("-target", target, *options, "-D", _END)]
    argv = ffi.new("const char*[]", args)
    desc = ffi.new("SessionDesc*")
    desc.structureSize, desc.defaultMatrixLayoutMode = ffi.sizeof("SessionDesc"), _COLUMN_MAJOR
    aux = ffi.new("void**")
    result = state.method(state.handle, _PARSE_ARGUMENTS, "ParseArguments")(state.handle, len(args), argv, desc, aux)
    try:
        entries = [desc.compilerOptionEntries[i] for i in range(desc.compilerOptionEntryCount)]
        parsed = result >= 0 and desc.targetCount == 1 and any(
            e.name == _MACRO_DEFINE and e.value.stringValue0 != ffi.NULL and ffi.string(e.value.stringValue0) ==
            _END.encode() for e in entries)
        if not parsed:  # the parser stops at the first option it refuses, and says nothing
            return None
        paths = ffi.new("const char*[]", [ffi.new("char[]", state.search_path)])
        desc.searchPaths, desc.searchPathCount = paths, 1
        out = ffi.new("void**")
        if state.method(state.handle, _CREATE_SESSION, "CreateSession")(state.handle, desc, out) < 0 or \
                out[0] == ffi.NULL:
            return None
    finally:
        state.release(aux[0])
    session = state.sessions[key] = _Session(out[0])
    while len(state.sessions) > SESSIONS:
        _, oldest = state.sessions.popitem(last=False)
        state.release(oldest.handle)
    return session


def _module(state: _Global, session: _Session, source: str, filename: str) -> tuple[Any, str]:
    """The session's module of `source` (loaded now where it is not yet) and the path its diagnostics name it by
    (`filename` in a folder named by the module), or Refused with Slang's diagnostics."""
    name = "m" + sha256(source.encode()).hexdigest()[:40]
    path = f"{name}/{filename}"
    found = session.modules.get(name)
    if found is not None:
        return found, path
    ffi = state.ffi
    diagnostics = ffi.new("void**")
    session.loads += 1  # a module that fails is kept by the session too
    module = state.method(session.handle, _LOAD_MODULE_FROM_SOURCE_STRING, "LoadModuleFromSourceString")(
        session.handle, name.encode(), path.encode(), source.encode(), diagnostics)
    log = _text(state.take(diagnostics[0]), name)
    if module == ffi.NULL:
        raise Refused(log or f"Slang could not load {filename}", -1)
    session.modules[name] = module  # the session's: no reference of ours to release
    return module, path


def _text(log: bytes, name: str) -> str:
    """Diagnostics with the module's folder left out of its paths (as slangc's, run in its temporary folder)."""
    return log.decode(errors="replace").replace(f"{name}/", "")


def _compile(state: _Global, session: _Session, source: str, entry: str, specialization: tuple[str, ...],
             constants_module: str | None) -> tuple[bytes, str]:
    ffi = state.ffi
    owned: list[Any] = []  # every object handed to us, released at the end
    logs: list[str] = []

    def check(result: int, diagnostics: Any, name: str) -> None:
        text = _text(state.take(diagnostics[0]), name)
        if text:
            logs.append(text)
        if result < 0:
            raise Refused("".join(logs), result)

    try:
        module, path = _module(state, session, source, "kernel.slang")
        name = path.split("/")[0]
        components = [module]
        if constants_module is not None:
            components.append(_module(state, session, constants_module, "constants.slang")[0])
        found, diagnostics = ffi.new("void**"), ffi.new("void**")
        result = state.method(module, _FIND_AND_CHECK_ENTRY_POINT, "FindAndCheckEntryPoint")(
            module, entry.encode(), _STAGE_COMPUTE, found, diagnostics)
        owned.append(found[0])
        check(result, diagnostics, name)
        point = found[0]
        generic = int(state.method(point, _SPECIALIZATION_PARAM_COUNT, "SpecializationParamCount")(point))
        if generic and not specialization:  # Slang's code generation would stop on an internal error
            raise Refused("".join(logs) + f"error: the entry point {entry!r} is generic ({generic} parameters) and "
                          "was given no specialization arguments (Slang.specialized)\n", -1)
        if specialization:
            keep = [ffi.new("char[]", s.encode()) for s in specialization]
            args = ffi.new("SpecializationArg[]", len(keep))
            for i, text in enumerate(keep):
                args[i].kind, args[i].expr = _SPECIALIZE_EXPR, text
            out, diagnostics = ffi.new("void**"), ffi.new("void**")
            result = state.method(point, _SPECIALIZE, "Specialize")(point, args, len(keep), out, diagnostics)
            owned.append(out[0])
            check(result, diagnostics, name)
            point = out[0]
        components.append(point)
        out, diagnostics = ffi.new("void**"), ffi.new("void**")
        array = ffi.new("void*[]", components)
        result = state.method(session.handle, _CREATE_COMPOSITE, "CreateComposite")(
            session.handle, array, len(components), out, diagnostics)
        owned.append(out[0])
        check(result, diagnostics, name)
        composite = out[0]
        out, diagnostics = ffi.new("void**"), ffi.new("void**")
        result = state.method(composite, _LINK, "Link")(composite, out, diagnostics)
        owned.append(out[0])
        check(result, diagnostics, name)
        linked = out[0]
        code, diagnostics = ffi.new("void**"), ffi.new("void**")
        result = state.method(linked, _GET_ENTRY_POINT_CODE, "GetEntryPointCode")(linked, 0, 0, code, diagnostics)
        data = state.take(code[0])
        check(result, diagnostics, name)
        diagnostics = ffi.new("void**")
        layout = state.method(linked, _GET_LAYOUT, "GetLayout")(linked, 0, diagnostics)
        check(-1 if layout == ffi.NULL else 0, diagnostics, name)
        blob = ffi.new("void**")
        result = state.lib.spReflection_ToJson(layout, ffi.NULL, blob)
        reflection = state.take(blob[0])
        if result < 0 or not reflection:
            raise Refused("".join(logs) + "Slang made no reflection JSON", result if result < 0 else -1)
        return data, reflection.decode(errors="replace")
    finally:
        for obj in reversed(owned):
            state.release(obj)


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
