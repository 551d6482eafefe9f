"""Headless OpenGL 4.3 contexts through EGL (moderngl + glcontext), and the GL calls moderngl does not wrap.

Context creation failures are turned into reasons a person can act on: no EGL
library, EGL without a device (no vendor driver), no OpenGL 4.3 core context.
"""

from __future__ import annotations

import ctypes
import os
import re
from ctypes.util import find_library
from typing import Any

from ironaccel.compute import ensure_runtime_dir
from ironaccel.errors import NotAvailable

BACKEND = "opengl"
REQUIRE = 430
FIX_EGL = ("install Mesa's EGL (apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri) or a GPU driver with EGL; "
           "GLCONTEXT_LINUX_LIBEGL names a libEGL.so explicitly")
FIX_VENDOR = ("install an EGL vendor driver: Mesa (apt-get install libegl-mesa0 libgl1-mesa-dri) or the NVIDIA "
              "driver's EGL ICD, listed in /usr/share/glvnd/egl_vendor.d or named by __EGL_VENDOR_LIBRARY_FILENAMES")
FIX_VERSION = "use a driver with OpenGL 4.3 core (Mesa 20+ llvmpipe, or a GPU driver)"

_EGL_ERRORS = {
    0x3001: "EGL_NOT_INITIALIZED", 0x3002: "EGL_BAD_ACCESS", 0x3003: "EGL_BAD_ALLOC", 0x3004: "EGL_BAD_ATTRIBUTE",
    0x3005: "EGL_BAD_CONFIG", 0x3006: "EGL_BAD_CONTEXT", 0x3007: "EGL_BAD_CURRENT_SURFACE",
    0x3008: "EGL_BAD_DISPLAY", 0x3009: "EGL_BAD_MATCH", 0x300A: "EGL_BAD_NATIVE_PIXMAP",
    0x300B: "EGL_BAD_NATIVE_WINDOW", 0x300C: "EGL_BAD_PARAMETER", 0x300D: "EGL_BAD_SURFACE",
    0x300E: "EGL_CONTEXT_LOST",
}


class KeepCurrent:
    """`with KeepCurrent():` whatever EGL context, display and surfaces are current on this thread when the block
    starts are current again when it ends (eglGetCurrent* / eglMakeCurrent through ctypes).

    Why: a finalizer (a fence, batch or mapped buffer of another GL device collected) can run in the middle of
    this device's call, and the cleanup it does makes the other device's context current; without this the rest
    of the call went to that context (wrong results on llvmpipe, seen only in a long test process)."""

    _egl: Any = None

    def __enter__(self) -> KeepCurrent:
        egl = KeepCurrent._egl
        if egl is None:
            egl = ctypes.CDLL(egl_library() or "libEGL.so.1")
            for name in ("eglGetCurrentContext", "eglGetCurrentDisplay", "eglGetCurrentSurface"):
                getattr(egl, name).restype = ctypes.c_void_p
            egl.eglGetCurrentSurface.argtypes = [ctypes.c_int]
            egl.eglMakeCurrent.argtypes = [ctypes.c_void_p] * 4
            egl.eglMakeCurrent.restype = ctypes.c_uint
            KeepCurrent._egl = egl
        self._saved = (egl.eglGetCurrentDisplay(), egl.eglGetCurrentSurface(EGL_DRAW),
                       egl.eglGetCurrentSurface(EGL_READ), egl.eglGetCurrentContext())
        return self

    def __exit__(self, *exc: Any) -> None:
        display, draw, read, context = self._saved
        if display:  # nothing was current: nothing to bring back
            KeepCurrent._egl.eglMakeCurrent(display, draw, read, context)


EGL_DRAW, EGL_READ = 0x3059, 0x305A


def egl_library() -> str | None:
    """The libEGL glcontext will load: GLCONTEXT_LINUX_LIBEGL, else the loader's libEGL."""
    return os.environ.get("GLCONTEXT_LINUX_LIBEGL") or find_library("EGL")


def create_context(moderngl: Any) -> Any:
    """A standalone EGL context with OpenGL 4.3 core, or NotAvailable saying why not.

    Mesa's EGL may load libwayland-client, which complains when XDG_RUNTIME_DIR is missing: the process gets
    a private one first (`ironaccel.compute.ensure_runtime_dir`).
    """
    ensure_runtime_dir()
    try:
        return moderngl.create_context(standalone=True, backend="egl", require=REQUIRE)
    except Exception as exc:
        raise _unavailable(exc) from exc


def _unavailable(exc: BaseException) -> NotAvailable:
    message = str(exc).strip() or type(exc).__name__
    lowered = message.lower()
    code_match = re.search(r"\((0x[0-9a-f]+)\)", lowered)
    code = int(code_match.group(1), 16) if code_match else None
    code_name = _EGL_ERRORS.get(code) if code is not None else None
    if "not loaded" in lowered or "cannot open shared object" in lowered or (
            "egl" in lowered and "no such file" in lowered):
        return NotAvailable(BACKEND, f"no EGL: libEGL could not be loaded ({message})", fix=FIX_EGL,
                            library=egl_library() or "libEGL.so.1")
    if "found 0 devices" in lowered:
        return NotAvailable(BACKEND, f"EGL is installed but lists no device, so no vendor driver is present "
                            f"({message})", fix=FIX_VENDOR, library=egl_library())
    if "device index" in lowered:
        return NotAvailable(BACKEND, f"GLCONTEXT_DEVICE_INDEX names no EGL device ({message})",
                            fix="unset GLCONTEXT_DEVICE_INDEX or pick an existing device")
    if "eglcreatecontext" in lowered:
        return NotAvailable(BACKEND, f"no OpenGL 4.3 core context: {message}" + (f" {code_name}" if code_name else ""),
                            fix=FIX_VERSION, code=code, code_name=code_name)
    if "requested opengl version" in lowered:
        return NotAvailable(BACKEND, f"OpenGL 4.3 is required for compute shaders: {message}", fix=FIX_VERSION)
    return NotAvailable(BACKEND, f"creating a headless EGL context failed: {type(exc).__name__}: {message}",
                        fix=FIX_EGL, code=code, code_name=code_name)


def make_current(ctx: Any) -> Any:
    """A callable making `ctx` current on the calling thread: glcontext's own enter where moderngl exposes it
    (what `ctx.mglo.__enter__` calls, less one Python-level method call, which is measurably cheaper)."""
    # Tried: skip it when eglGetCurrentContext (ctypes) already names this context.  The check costs more than
    # the enter it saves, on a software renderer and on a GPU alike.
    enter = getattr(getattr(ctx.mglo, "_context", None), "__enter__", None)
    return enter if enter is not None else ctx.mglo.__enter__


class GLCalls:
    """GL entry points moderngl does not wrap (fences, flush), loaded through the context's own loader.

    `available` is False when this moderngl/glcontext does not expose its loader;
    callers then fall back to glFinish (moderngl's `ctx.finish()`).
    """

    GL_SYNC_GPU_COMMANDS_COMPLETE = 0x9117
    GL_SYNC_FLUSH_COMMANDS_BIT = 0x1
    GL_ALREADY_SIGNALED = 0x911A
    GL_TIMEOUT_EXPIRED = 0x911B
    GL_CONDITION_SATISFIED = 0x911C
    GL_WAIT_FAILED = 0x911D
    GL_GPU_MEMORY_INFO_TOTAL_AVAILABLE_MEMORY_NVX = 0x9048

    def __init__(self, ctx: Any):
        self.available = False
        loader = getattr(getattr(ctx.mglo, "_context", None), "load", None)
        if loader is None:
            return
        try:
            self.fence_sync = _fn(loader, "glFenceSync", ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint)
            self.client_wait_sync = _fn(loader, "glClientWaitSync", ctypes.c_uint, ctypes.c_void_p, ctypes.c_uint,
                                        ctypes.c_uint64)
            self.delete_sync = _fn(loader, "glDeleteSync", None, ctypes.c_void_p)
            self.flush = _fn(loader, "glFlush", None)
            self.get_integerv = _fn(loader, "glGetIntegerv", None, ctypes.c_uint, ctypes.POINTER(ctypes.c_int))
        except LookupError:
            return
        self.available = True
        u, p, i64, vp = ctypes.c_uint, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p
        # The execution model's calls (batches, timestamps, persistent mapping, reflection, interop).
        optional: dict[str, tuple[Any, ...]] = {
            "bind_buffer": ("glBindBuffer", None, u, u),
            "bind_buffer_base": ("glBindBufferBase", None, u, u, u),
            "copy_buffer_sub_data": ("glCopyBufferSubData", None, u, u, i64, i64, i64),
            "clear_buffer_sub_data": ("glClearBufferSubData", None, u, u, i64, i64, u, u, p),
            "gen_buffers": ("glGenBuffers", None, ctypes.c_int, ctypes.POINTER(u)),
            "delete_buffers": ("glDeleteBuffers", None, ctypes.c_int, ctypes.POINTER(u)),
            "buffer_storage": ("glBufferStorage", None, u, i64, vp, u),
            "buffer_sub_data": ("glBufferSubData", None, u, i64, i64, vp),
            "get_buffer_sub_data": ("glGetBufferSubData", None, u, i64, i64, vp),
            "map_buffer_range": ("glMapBufferRange", vp, u, i64, i64, u),
            "unmap_buffer": ("glUnmapBuffer", ctypes.c_ubyte, u),
            "gen_queries": ("glGenQueries", None, ctypes.c_int, ctypes.POINTER(u)),
            "delete_queries": ("glDeleteQueries", None, ctypes.c_int, ctypes.POINTER(u)),
            "query_counter": ("glQueryCounter", None, u, u),
            "get_query_object_ui64v": ("glGetQueryObjectui64v", None, u, u, ctypes.POINTER(ctypes.c_uint64)),
            "get_queryiv": ("glGetQueryiv", None, u, u, ctypes.POINTER(ctypes.c_int)),
            "get_program_resource_index": ("glGetProgramResourceIndex", u, u, u, ctypes.c_char_p),
            "get_program_resourceiv": ("glGetProgramResourceiv", None, u, u, u, ctypes.c_int, ctypes.POINTER(u),
                                       ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)),
            "get_error": ("glGetError", u),
            "create_memory_objects": ("glCreateMemoryObjectsEXT", None, ctypes.c_int, ctypes.POINTER(u)),
            "delete_memory_objects": ("glDeleteMemoryObjectsEXT", None, ctypes.c_int, ctypes.POINTER(u)),
            "memory_object_parameteriv": ("glMemoryObjectParameterivEXT", None, u, u, ctypes.POINTER(ctypes.c_int)),
            "import_memory_fd": ("glImportMemoryFdEXT", None, u, ctypes.c_uint64, u, ctypes.c_int),
            "buffer_storage_mem": ("glBufferStorageMemEXT", None, u, i64, u, ctypes.c_uint64),
        }
        self.missing: list[str] = []
        for attr, (name, restype, *argtypes) in optional.items():
            try:
                setattr(self, attr, _fn(loader, name, restype, *argtypes))
            except LookupError:
                self.missing.append(name)

    def has(self, *names: str) -> bool:
        """Whether the loader gave every one of these GL entry points (by GL name)."""
        return self.available and not any(n in self.missing for n in names)

    def integer(self, name: int) -> int:
        value = ctypes.c_int(0)
        self.get_integerv(name, ctypes.byref(value))
        return value.value


def _fn(loader: Any, name: str, restype: Any, *argtypes: Any) -> Any:
    address = loader(name)
    if not address:
        raise LookupError(name)
    return ctypes.CFUNCTYPE(restype, *argtypes)(address)
