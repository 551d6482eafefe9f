"""PyCUDA's `Linker` on nvJitLink: relocatable device code and libraries (cudadevrt) linked into one module.

PyCUDA drives the driver's JIT linker (cuLink*); here nvJitLink does the
same job from pip packages alone (`nvidia-nvjitlink`; `libcudadevrt.a` comes
from `nvidia-cuda-runtime` or a CUDA toolkit), producing a CUBIN for the
current device that is then loaded into the current context.  Inputs are
`jit_input_type` values as in PyCUDA (CUBIN, PTX, FATBINARY, OBJECT,
LIBRARY; NVVM means LTO-IR).  The message handler is called with
`(success, info_log, error_log)` as in PyCUDA.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

from ironaccel import errors as ia

from ._context import _current
from ._enums import jit_input_type, jit_option
from ._errors import LogicError, bad_type, combo, invalid, translate
from ._module import Module, module_from_buffer

__all__ = ["Linker", "find_static_library"]


def _nvjitlink() -> Any:
    """cuda.bindings.nvjitlink, loaded as ironaccel's Linker loads it; NotAvailable as PyCUDA's RuntimeError."""
    from ironaccel_cuda.linker import nvjitlink as load

    try:
        return load()
    except ia.NotAvailable as exc:
        raise translate(exc, "nvJitLinkCreate") from None


def _link_error(routine: str, log: str, exc: BaseException) -> Exception:
    cls = combo(LogicError, ia.CompileError)
    text = f"{routine} failed: {exc}" + (f" - {log.strip()}" if log.strip() else "")
    err = cls(text, op=routine, detail=log.strip() or str(exc))
    err.log = log
    return err


_OPTION_FLAGS = {
    "MAX_REGISTERS": lambda v: [f"-maxrregcount={int(v)}"],
    "OPTIMIZATION_LEVEL": lambda v: [f"-O{int(v)}"],
    "GENERATE_DEBUG_INFO": lambda v: ["-g"] if v else [],
    "GENERATE_LINE_INFO": lambda v: ["-lineinfo"] if v else [],
    "LOG_VERBOSE": lambda v: ["-verbose"] if v else [],
}


class Linker:
    """pycuda.driver.Linker(message_handler=None, options=None, log_verbose=False)."""

    def __init__(self, message_handler: Any = None, options: Sequence[Any] | None = None,
                 log_verbose: bool = False):
        from ._context import Device

        self._handler = message_handler
        ctx = _current("nvJitLinkCreate")
        major, minor = Device._from_ordinal(ctx._ordinal).compute_capability()
        flags = [f"-arch=sm_{major}{minor}"]
        try:
            pairs = [(key, value) for key, value in options or ()]
        except (TypeError, ValueError):
            raise bad_type("nvJitLinkCreate", "options must be (jit_option, value) pairs") from None
        for key, value in pairs:
            try:
                name = jit_option(key.__index__()).name
                make = _OPTION_FLAGS.get(name)
                if make is None:
                    warnings.warn(f"PyCUDA compat: link option {name} has no nvJitLink equivalent; ignored",
                                  stacklevel=2)
                    continue
                flags += make(value)
            except (AttributeError, TypeError, ValueError) as exc:
                raise invalid("nvJitLinkCreate", f"bad link option ({key!r}, {value!r}): {exc}") from None
        if log_verbose and "-verbose" not in flags:
            flags.append("-verbose")
        self._nv = _nvjitlink()
        try:
            self._h = self._nv.create(len(flags), flags)
        except Exception as exc:
            raise _link_error("nvJitLinkCreate", "", exc) from None
        self._types = {
            int(jit_input_type.CUBIN): self._nv.InputType.CUBIN,
            int(jit_input_type.PTX): self._nv.InputType.PTX,
            int(jit_input_type.FATBINARY): self._nv.InputType.FATBIN,
            int(jit_input_type.OBJECT): self._nv.InputType.OBJECT,
            int(jit_input_type.LIBRARY): self._nv.InputType.LIBRARY,
        }
        if "NVVM" in jit_input_type.__members__:
            self._types[int(jit_input_type.NVVM)] = self._nv.InputType.LTOIR

    def _kind(self, input_type: Any) -> Any:
        try:
            return self._types[int(input_type)]
        except (KeyError, TypeError, ValueError):
            raise _link_error("nvJitLinkAddData", "", ValueError(f"unknown input type {input_type!r}")) from None

    def _logs(self) -> tuple[str, str]:
        from ironaccel_cuda.linker import nvjitlink_log

        return nvjitlink_log(self._h), nvjitlink_log(self._h, error=True)

    def _open(self, routine: str) -> Any:
        """The nvJitLink handle; LogicError once link_module() or close() has ended this Linker."""
        if getattr(self, "_h", None) is None:
            raise invalid(routine, "this Linker was already linked or closed")
        return self._h

    def _fail(self, routine: str, exc: BaseException) -> Exception:
        info, error = self._logs()
        if self._handler is not None:
            self._handler(False, info, error)
        return _link_error(routine, error, exc)

    def add_data(self, data: Any, input_type: Any, name: str = "unknown") -> None:
        try:
            blob = bytes(memoryview(data).cast("B"))
        except (TypeError, ValueError) as exc:
            raise _link_error("nvJitLinkAddData", "", exc) from None
        self._open("nvJitLinkAddData")
        kind = self._kind(input_type)
        if kind == self._nv.InputType.PTX and not blob.endswith(b"\0"):
            blob += b"\0"
        try:
            self._nv.add_data(self._h, kind, blob, len(blob), str(name))
        except Exception as exc:
            raise self._fail("nvJitLinkAddData", exc) from None

    def add_file(self, filename: str, input_type: Any) -> None:
        self._open("nvJitLinkAddFile")
        try:
            self._nv.add_file(self._h, self._kind(input_type), os.fspath(filename))
        except ia.IronAccelError:
            raise
        except Exception as exc:
            raise self._fail("nvJitLinkAddFile", exc) from None

    def link_module(self) -> Module:
        """Finish the link and load the result into the current context."""
        self._open("nvJitLinkComplete")
        try:
            self._nv.complete(self._h)
            size = self._nv.get_linked_cubin_size(self._h)
            cubin = bytearray(size)
            self._nv.get_linked_cubin(self._h, cubin)
        except Exception as exc:
            raise self._fail("nvJitLinkComplete", exc) from None
        if self._handler is not None:
            info, error = self._logs()
            self._handler(True, info, error)
        self.close()
        return module_from_buffer(bytes(cubin))

    def close(self) -> None:
        h, self._h = getattr(self, "_h", None), None
        if h is not None:
            try:
                self._nv.destroy(h)
            except Exception:
                pass

    def __del__(self) -> None:
        self.close()


def find_static_library(name: str, libdir: str | None = None) -> str:
    """The path of `lib<name>.a`: in `libdir` if given, else where cuda.pathfinder finds it (pip wheels,
    CUDA_HOME), else where PyCUDA looks (CUDA_ROOT/lib64, LD_LIBRARY_PATH, /usr/lib/x86_64-linux-gnu,
    next to nvcc on PATH)."""
    filename = f"lib{name}.a"
    if libdir is not None:
        path = os.path.join(libdir, filename)
        if not os.path.isfile(path):
            raise OSError(f'CUDA SDK library file "{path}" not found')
        return path
    try:
        import cuda.pathfinder as pathfinder

        if name in getattr(pathfinder, "SUPPORTED_STATIC_LIBS", ()):
            return str(pathfinder.find_static_lib(name))
    except Exception:
        pass
    candidates = []
    if os.environ.get("CUDA_ROOT"):
        candidates.append(os.path.join(os.environ["CUDA_ROOT"], "lib64"))
    candidates += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    candidates.append("/usr/lib/x86_64-linux-gnu")
    import shutil

    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(os.path.join(os.path.dirname(nvcc), "..", "lib64"))
    for folder in candidates:
        path = os.path.join(folder, filename)
        if os.path.isfile(path):
            return path
    raise OSError(f'CUDA library file "{filename}" not found: install nvidia-cuda-runtime (pip) or pass cuda_libdir')
