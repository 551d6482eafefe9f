"""Shader code as a ComputeDevice accepts it, and what its storage buffers declare.

`source_text` turns WGSL or GLSL input into text the compilers will see whole:
a NUL would make the driver's C string end there (silently dropping the
rest) and a lone surrogate cannot be encoded, so both are refused.

`Interface` is what a program says about what a dispatch binds: per storage
buffer, in order, its name, its element type where the language declares it
(a runtime array of a scalar or vector type) and whether the shader may write
it (`bindings`); its parameter block (`params`, a `ParamBlock` of
`ironaccel.compute.params`); and its specialization constants (`constants`).
`pipeline.interface` hands it to users; it is public and stable.
`wgsl_interface` and `glsl_interface` read it from source; Vulkan reads it
from the SPIR-V module.  Anything not understood (a struct element, a type
alias, a macro) is recorded as unknown: its element type is not checked and
the binding counts as writable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgument
from ..types import DType
from .params import ConstantInfo, ParamBlock

__all__ = ["source_text", "StorageBinding", "BindingInfo", "Interface", "wgsl_interface", "glsl_interface",
           "check_bindings"]

_SPIRV_MAGIC = (b"\x03\x02\x23\x07", b"\x07\x23\x02\x03")


def source_text(backend: str, code: Any, language: str, op: str = "pipeline") -> str:
    """`code` as shader source text (str, or UTF-8 bytes); SPIR-V, word lists, NULs and lone surrogates are refused."""
    if isinstance(code, (bytes, bytearray, memoryview)):
        raw = bytes(code)
        if raw[:4] in _SPIRV_MAGIC:
            raise InvalidArgument(backend, op, detail=f"this is SPIR-V; {backend} code is {language} source")
        try:
            code = raw.decode()
        except UnicodeDecodeError as exc:
            raise InvalidArgument(backend, op, detail=f"code bytes are not UTF-8 text: {exc}") from None
    elif not isinstance(code, str):
        raise InvalidArgument(backend, op, detail=f"{backend} code is {language} source, got {type(code).__name__}")
    elif not code.isascii():
        try:
            code.encode()
        except UnicodeEncodeError as exc:
            raise InvalidArgument(backend, op, detail=f"code holds a lone surrogate at index {exc.start}; "
                                  "source must be encodable as UTF-8") from None
    nul = code.find("\0")
    if nul >= 0:
        raise InvalidArgument(backend, op, detail=f"code holds a NUL character at index {nul}; the compiler would "
                              "stop reading there")
    return code


@dataclass(frozen=True)
class StorageBinding:
    """One storage buffer a shader declares: its binding, element type (None: not stated), writability and name."""

    binding: int
    element: DType | None
    writable: bool = True
    name: str = ""


@dataclass(frozen=True)
class BindingInfo:
    """A storage buffer of a pipeline, in dispatch order: its name ("" where the code does not say), the binding
    (or argument) index the vendor API sees, the element type declared (None: any) and whether it is written."""

    name: str
    binding: int
    element: DType | None
    writable: bool


@dataclass(frozen=True)
class Interface:
    """What a pipeline binds: its storage buffers, its parameter block and its specialization constants.

    `elements` and `writable` give, per buffer 0..n-1, the declared element type (None: any) and whether the
    shader may write there; `bindings` the same with names; `params` the reflected parameter block (None where
    the code declares none, or it could not be read); `constants` the specialization constants the code declares.
    """

    elements: tuple[DType | None, ...]
    writable: tuple[bool, ...]
    bindings: tuple[BindingInfo, ...] = ()
    params: ParamBlock | None = None
    constants: tuple[ConstantInfo, ...] = ()

    def __post_init__(self) -> None:
        if not self.bindings and self.elements:
            object.__setattr__(self, "bindings", tuple(
                BindingInfo("", i, e, w) for i, (e, w) in enumerate(zip(self.elements, self.writable))))

    @classmethod
    def unknown(cls, buffers: int) -> Interface:
        """Nothing declared: any element type, every binding writable."""
        return cls((None,) * buffers, (True,) * buffers)

    @classmethod
    def of(cls, buffers: int, declared: Iterable[StorageBinding], params: ParamBlock | None = None,
           constants: Iterable[ConstantInfo] = ()) -> Interface:
        """The interface of bindings 0..buffers-1 from declarations; a binding declared twice (an #ifdef, say)
        is unknown."""
        found: dict[int, StorageBinding | None] = {}
        for decl in declared:
            if 0 <= decl.binding < buffers:
                found[decl.binding] = None if decl.binding in found else decl
        decls = [found.get(i) for i in range(buffers)]
        elements = tuple(d.element if d is not None else None for d in decls)
        writable = tuple(d.writable if d is not None else True for d in decls)
        bindings = tuple(BindingInfo(d.name if d is not None else "", i, e, w)
                         for i, (d, e, w) in enumerate(zip(decls, elements, writable)))
        return cls(elements, writable, bindings, params, tuple(constants))

    def with_params(self, params: ParamBlock | None, constants: Iterable[ConstantInfo] = ()) -> Interface:
        """This interface with a parameter block and constants (what a backend adds after reading them)."""
        return Interface(self.elements, self.writable, self.bindings, params, tuple(constants))


def check_bindings(backend: str, interface: Interface, buffers: Sequence[Any], op: str = "dispatch") -> None:
    """Element types against the declared ones, and the one rule for a buffer bound more than once:
    allowed only where every binding it occupies is read-only."""
    for index, (buf, want) in enumerate(zip(buffers, interface.elements)):
        if want is not None and buf.dtype is not want:
            raise InvalidArgument(backend, op, detail=f"buffer {index} holds {buf.dtype.value}, the shader declares "
                                  f"binding {index} as {want.value}")
    n = len(buffers)
    if n > 1 and (buffers[0] is buffers[1] if n == 2 else len(set(map(id, buffers))) < n):
        first: dict[int, int] = {}
        for index, buf in enumerate(buffers):
            seen = first.setdefault(id(buf), index)
            if seen != index and (interface.writable[seen] or interface.writable[index]):
                raise InvalidArgument(backend, op, detail=f"buffers {seen} and {index} are the same buffer and the "
                                      "shader may write one of those bindings; a buffer may be bound twice only "
                                      "where every binding it occupies is read-only")


_SCALARS_WGSL = {"f32": DType.FLOAT32, "i32": DType.INT32, "u32": DType.UINT32, "f16": DType.FLOAT16,
                 "f64": DType.FLOAT64}
_SHORT_VECTORS_WGSL = {"f": DType.FLOAT32, "i": DType.INT32, "u": DType.UINT32, "h": DType.FLOAT16}
_LINE_COMMENTS = re.compile(r"//[^\n]*")
_BLOCK_COMMENTS = re.compile(r"/\*.*?\*/", re.S)
_WGSL_DECL = re.compile(r"((?:@\s*\w+\s*(?:\([^)]*\))?\s*)+)var\s*<\s*storage\s*(?:,\s*(\w+)\s*)?>\s*(\w+)\s*:"
                        r"\s*([^;=]+)")
_WGSL_ATTRIBUTE = re.compile(r"@\s*(group|binding)\s*\(\s*(\d+)\s*\)")
_WGSL_ARRAY = re.compile(r"^array\s*<\s*(.+?)\s*(?:,\s*\w+\s*)?>$")
_WGSL_ELEMENT = re.compile(r"^(?:(?:vec[234]|atomic)\s*<\s*(\w+)\s*>|vec[234]([fiuh])|(\w+))$")


def _without_comments(code: str) -> str:
    return _LINE_COMMENTS.sub(" ", _BLOCK_COMMENTS.sub(" ", code))


def wgsl_interface(code: str) -> list[StorageBinding]:
    """The `var<storage>` declarations of group 0 in WGSL source (read-only unless `read_write`)."""
    found = []
    for match in _WGSL_DECL.finditer(_without_comments(code)):
        attrs = {name: int(value) for name, value in _WGSL_ATTRIBUTE.findall(match.group(1))}
        if attrs.get("group") != 0 or "binding" not in attrs:
            continue
        element = None
        array = _WGSL_ARRAY.match(match.group(4).strip())
        if array:
            inner = _WGSL_ELEMENT.match(array.group(1))
            if inner:
                generic, short, scalar = inner.groups()
                element = _SHORT_VECTORS_WGSL.get(short) if short else _SCALARS_WGSL.get(generic or scalar)
        found.append(StorageBinding(attrs["binding"], element, (match.group(2) or "read") == "read_write",
                                    match.group(3)))
    return found


_GLSL_BASE = {"float": DType.FLOAT32, "int": DType.INT32, "uint": DType.UINT32, "double": DType.FLOAT64,
              "float16_t": DType.FLOAT16, "float64_t": DType.FLOAT64, "int8_t": DType.INT8, "uint8_t": DType.UINT8,
              "int16_t": DType.INT16, "uint16_t": DType.UINT16, "int64_t": DType.INT64, "uint64_t": DType.UINT64,
              "float32_t": DType.FLOAT32, "int32_t": DType.INT32, "uint32_t": DType.UINT32}
_GLSL_VECTOR_PREFIX = {"": DType.FLOAT32, "i": DType.INT32, "u": DType.UINT32, "d": DType.FLOAT64,
                       "f16": DType.FLOAT16, "f64": DType.FLOAT64, "i64": DType.INT64, "u64": DType.UINT64}
_GLSL_BLOCK = re.compile(r"layout\s*\(([^)]*)\)\s*((?:\w+\s+)*)buffer\s+(\w+)\s*\{([^}]*)\}\s*(\w*)")
_GLSL_BINDING = re.compile(r"\bbinding\s*=\s*(\d+)")
_GLSL_MEMBER = re.compile(r"^((?:(?:readonly|writeonly|restrict|coherent|volatile|highp|mediump|lowp)\s+)*)"
                          r"(\w+)\s+(\w+)\s*\[\s*\]$")
_GLSL_VECTOR = re.compile(r"^(|i|u|d|f16|f64|i64|u64)vec[234]$")


def _glsl_element(type_name: str) -> DType | None:
    if type_name in _GLSL_BASE:
        return _GLSL_BASE[type_name]
    vector = _GLSL_VECTOR.match(type_name)
    return _GLSL_VECTOR_PREFIX[vector.group(1)] if vector else None


def glsl_interface(code: str) -> list[StorageBinding]:
    """The `buffer` blocks of GLSL source: binding, and the element type of a block that is one runtime array."""
    found = []
    text = _without_comments(code)
    typed = "#define" not in text  # a macro may rename a type: then element types stay unknown
    for match in _GLSL_BLOCK.finditer(text):
        layout, qualifiers, block, body, instance = match.groups()
        binding = _GLSL_BINDING.search(layout)
        members = [m.strip() for m in body.split(";") if m.strip()]
        block_readonly = "readonly" in qualifiers.split()
        element = None
        member_readonly = False
        name = instance or block
        if len(members) == 1:
            member = _GLSL_MEMBER.match(" ".join(members[0].split()))
            if member:
                member_readonly = "readonly" in member.group(1).split()
                element = _glsl_element(member.group(2)) if typed else None
                name = instance or member.group(3)
        found.append(StorageBinding(int(binding.group(1)) if binding else 0, element,
                                    not (block_readonly or member_readonly), name))
    return found
