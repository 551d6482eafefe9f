"""Kernel source in a language a device does not compile itself, translated per device.

A source object -- `ironaccel_slang.Slang(text)`, say -- has a method
``__ironaccel_translate__(device, entry, constants)`` returning a `Translation`:
the device's own code (SPIR-V, WGSL, GLSL, CUDA C++, ...), the entry point's
name in it, and what the translator's reflection says about it (the interface:
buffer names, element types and access, the params block with its names and
offsets; the workgroup size).  `pipeline()` compiles that code with the
device's own compiler and gives the program the translator's interface, so a
dispatch binds and packs by the source's names on every backend.  The
translator consumes the constants (it specializes the source itself), so the
device sees none.  The kit knows no source language: any object with the
method is one, and plain code (str, bytes, word lists) never is.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgument
from .handles import Program
from .params import ParamBlock
from .shaders import Interface

__all__ = ["Translation", "translate", "settle"]

_PLAIN = (str, bytes, bytearray, memoryview)


@dataclass(frozen=True)
class Translation:
    """What a source object made for one device.

    `code`/`entry`: what the device's `pipeline()` takes; `key`: identifies the translation (source, options,
    target, compiler) in the program cache; `params`: the number of params the device is asked for (None: as
    the code declares); `workgroup_size`: the size the code fixes (None: the caller's); `interface`: replaces
    the compiled program's (None: keep the device's own reflection); `verify`: called with the device's own
    interface of the compiled code before it is replaced (raises where the two disagree).
    """

    code: Any
    entry: str
    key: Hashable
    params: int | None = None
    workgroup_size: tuple[int, int, int] | None = None
    interface: Interface | None = None
    verify: Callable[[Interface], None] | None = None


def translate(backend: str, device: Any, code: Any, entry: str, constants: Mapping[str | int, Any],
              buffers: int) -> Translation | None:
    """The translation of a source object for `device`, or None where `code` is the device's own code; the
    pipeline's `buffers` must be as many as the translator's interface binds."""
    if isinstance(code, _PLAIN):
        return None
    method = getattr(code, "__ironaccel_translate__", None)
    if method is None:
        return None
    result = method(device, entry, dict(constants))
    if not isinstance(result, Translation):
        raise InvalidArgument(backend, "pipeline", detail=f"{type(code).__name__}.__ironaccel_translate__ returned "
                              f"{type(result).__name__}, not an ironaccel.compute.Translation")
    bindings = result.interface.bindings if result.interface is not None else None
    if bindings is not None and len(bindings) != buffers:
        names = ", ".join(b.name or str(b.binding) for b in bindings) or "none"
        raise InvalidArgument(backend, "pipeline", detail=f"entry point {entry!r} takes {len(bindings)} buffers "
                              f"({names}), the pipeline was asked for buffers={buffers}")
    return result


def settle(program: Program, translation: Translation) -> None:
    """Give a program compiled from `translation` the translator's interface (its params block included)."""
    interface = translation.interface
    if interface is None:
        return
    if translation.verify is not None:
        translation.verify(program.interface)
    program.interface = interface
    block: ParamBlock | None = interface.params
    if block is not None:
        program.block = block
        program.params = len(block.fields)
