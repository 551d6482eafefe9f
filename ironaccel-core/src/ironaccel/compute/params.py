"""Typed kernel parameters: the type tree of a params block, its layout rules, and packing by name.

A backend reflects its code's parameter block (SPIR-V push constants, a WGSL
`var<uniform>` struct, a GLSL uniform block, a CUDA kernel's by-value
arguments) into a `ParamBlock`: `Field`s with byte offsets and a type tree of
`Scalar`, `Vector`, `Array` and `Struct`.  Where the reflection gives offsets
(SPIR-V Offset decorations, GL program introspection, cuFuncGetParamInfo) the
backend builds the fields itself; where it gives only declarations (WGSL and
GLSL text, C++ signatures) `layout_struct` applies the language's rule
("std140", "std430", "wgsl-uniform", "c").

`ParamBlock.pack(value)` is the one packing rule for every backend.  It takes
a dict by field name (nested dicts or sequences for structs, vectors and
arrays), a numpy structured scalar, a dataclass instance, `bytes` of exactly
the block's size, or a positional sequence with one value per top-level
field; every field must be given, and every value must fit its field's type
(InvalidArgument names the field otherwise).  The parsers here
(`wgsl_params`, `glsl_params`, `c_params`) read the declarations of text
code; they understand plain declarations and say what they cannot read.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from struct import Struct as _Packer
from struct import error as _PackError
from struct import pack_into
from typing import Any

import numpy as np

from ..errors import InvalidArgument
from ..types import DType

__all__ = [
    "Scalar", "Vector", "Array", "Struct", "Field", "ParamBlock", "ParamType", "LAYOUTS",
    "layout_struct", "wgsl_params", "glsl_params", "c_params", "wgsl_overrides", "ConstantInfo",
]

LAYOUTS = ("std140", "std430", "wgsl-uniform", "c")


@dataclass(frozen=True)
class Scalar:
    """One value of `dtype` (`size` bytes: a GLSL bool is 4)."""

    dtype: DType
    size: int = 0

    def __post_init__(self) -> None:
        if not self.size:
            object.__setattr__(self, "size", self.dtype.itemsize)

    def __str__(self) -> str:
        return self.dtype.value


@dataclass(frozen=True)
class Vector:
    """`count` (2 to 4) values of `dtype`, packed."""

    dtype: DType
    count: int

    @property
    def size(self) -> int:
        """Bytes the vector takes: its element count times the element size."""
        return self.count * self.dtype.itemsize

    def __str__(self) -> str:
        return f"{self.dtype.value}x{self.count}"


@dataclass(frozen=True)
class Array:
    """`count` elements `stride` bytes apart."""

    element: ParamType
    count: int
    stride: int

    @property
    def size(self) -> int:
        """Bytes the array takes in the block: its element count times its stride."""
        return self.count * self.stride

    def __str__(self) -> str:
        return f"{self.element}[{self.count}]"


@dataclass(frozen=True)
class Field:
    """A member of a struct: its name, byte offset from the struct's start, and type."""

    name: str
    offset: int
    type: ParamType


@dataclass(frozen=True)
class Struct:
    """Named members at their offsets; `size` includes the padding the layout rule asks for."""

    name: str
    fields: tuple[Field, ...]
    size: int

    def __str__(self) -> str:
        return self.name or "struct"


ParamType = Scalar | Vector | Array | Struct


@dataclass(frozen=True)
class ConstantInfo:
    """A specialization constant: its name, id (SPIR-V SpecId / WGSL @id, or None), element type and default."""

    name: str
    id: int | None
    dtype: DType | None
    default: Any = None


# -- layout rules -----------------------------------------------------------------------------------------

def _round(value: int, align: int) -> int:
    return -(-value // align) * align


def _align(kind: Any, rule: str) -> int:
    """The alignment of a type under a rule (std140/std430 for GLSL, WGSL's uniform rule, C's natural one)."""
    if isinstance(kind, Scalar):
        return kind.size
    if isinstance(kind, Vector):
        n = kind.dtype.itemsize
        if rule == "c":  # CUDA's vector types: float2 8, float3 4, float4 16; double2 16
            return n if kind.count == 3 else n * kind.count
        return n * (2 if kind.count == 2 else 4)
    if isinstance(kind, Array):
        inner = _align(kind.element, rule)
        return max(inner, 16) if rule in ("std140", "wgsl-uniform") else inner
    if isinstance(kind, Struct):
        inner = max((_align(f.type, rule) for f in kind.fields), default=1)
        return max(inner, 16) if rule in ("std140", "wgsl-uniform") else inner
    raise TypeError(kind)


def _size(kind: Any, rule: str) -> int:
    if isinstance(kind, Vector) and rule == "c" and kind.count == 3:
        return 3 * kind.dtype.itemsize
    return int(kind.size)


def array_of(element: ParamType, count: int, rule: str) -> Array:
    """An array of `count` elements with the stride `rule` gives (std140 and WGSL uniform round it to 16)."""
    stride = _round(_size(element, rule), _align(element, rule))
    if rule in ("std140", "wgsl-uniform"):
        stride = _round(stride, 16)
    return Array(element, count, stride)


def layout_struct(name: str, members: Sequence[tuple[str, ParamType]], rule: str,
                  explicit: Mapping[str, tuple[int | None, int | None]] | None = None) -> Struct:
    """A Struct of `members` (name, type) laid out by `rule`; `explicit` maps a member to WGSL's (@align, @size)."""
    if rule not in LAYOUTS:
        raise ValueError(f"unknown layout rule {rule!r}; one of {LAYOUTS}")
    offset = 0
    fields = []
    widest = 1
    for member, kind in members:
        align, size = _align(kind, rule), _size(kind, rule)
        forced_align, forced_size = (explicit or {}).get(member, (None, None))
        align, size = forced_align or align, forced_size or size
        # std140/std430: a vec3 takes 12 bytes and a scalar may follow in its last 4; WGSL and C the same.
        offset = _round(offset, align)
        fields.append(Field(member, offset, kind))
        offset += size
        widest = max(widest, align)
    if rule in ("std140", "wgsl-uniform"):
        widest = max(widest, 16) if any(isinstance(f.type, (Struct, Array)) for f in fields) or rule == "std140" \
            else widest
    return Struct(name, tuple(fields), _round(offset, widest))


# -- packing -----------------------------------------------------------------------------------------------

_CODES = {DType.FLOAT16: "e", DType.FLOAT32: "f", DType.FLOAT64: "d", DType.INT8: "b", DType.UINT8: "B",
          DType.INT16: "h", DType.UINT16: "H", DType.INT32: "i", DType.UINT32: "I", DType.INT64: "q",
          DType.UINT64: "Q", DType.BOOL: "?"}
_FLOATS = (DType.FLOAT16, DType.FLOAT32, DType.FLOAT64)
_INTS = frozenset({int, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64})
#: The exact value types the one-call positional path takes per field type (ranges are struct's to check).
_FAST_TYPES: dict[DType, frozenset[type]] = {
    DType.FLOAT32: frozenset({float, int, np.float32, np.float16}),
    DType.FLOAT64: frozenset({float, int, np.float64, np.float32, np.float16}),
    DType.INT32: _INTS, DType.UINT32: _INTS, DType.INT64: _INTS, DType.UINT64: _INTS,
}
_INT_RANGES = {d: (int(np.iinfo(d.value).min), int(np.iinfo(d.value).max)) for d in
               (DType.INT8, DType.UINT8, DType.INT16, DType.UINT16, DType.INT32, DType.UINT32, DType.INT64,
                DType.UINT64)}


@dataclass(frozen=True)
class ParamBlock:
    """A kernel's parameter block: its fields (a Struct), the layout rule it follows, and its size in bytes."""

    struct: Struct
    layout: str

    @property
    def fields(self) -> tuple[Field, ...]:
        """The block's fields in declaration order, with their offsets."""
        return self.struct.fields

    @property
    def size(self) -> int:
        """Bytes of the packed block, padding included."""
        return self.struct.size

    @property
    def names(self) -> tuple[str, ...]:
        """The fields' names in declaration order (the keys a params mapping may use)."""
        return tuple(f.name for f in self.struct.fields)

    def numpy_dtype(self) -> np.dtype:
        """A numpy structured dtype with the block's names, offsets and size: build params with it
        (`np.zeros((), block.numpy_dtype())`) or read packed bytes back (`np.frombuffer(raw, dtype)[0]`)."""
        return _numpy(self.struct)

    def describe(self) -> str:
        """One line per leaf: offset, path, type; for messages and docs."""
        lines: list[str] = []
        _describe(self.struct, 0, "", lines)
        return "\n".join(lines)

    @functools.cached_property
    def _positional(self) -> tuple[_Packer, tuple[frozenset[type], ...]] | None:
        """A struct.Struct packer and the exact value types each field takes, where every field is a scalar (the hot
        path of a positional dispatch: one pack call); None otherwise."""
        codes, allowed, at = ["<"], [], 0
        for f in self.struct.fields:
            kind = f.type
            if not isinstance(kind, Scalar) or kind.dtype not in _FAST_TYPES or f.offset < at:
                return None
            codes.append("x" * (f.offset - at) + _CODES[kind.dtype])
            allowed.append(_FAST_TYPES[kind.dtype])
            at = f.offset + kind.size
        codes.append("x" * (self.size - at))
        return _Packer("".join(codes)), tuple(allowed)

    @functools.cached_property
    def _keys(self) -> tuple[frozenset[str], tuple[str, ...]]:
        """The field names as a set (to match a params dict's keys) and in order (to read its values)."""
        return frozenset(self.names), self.names

    def pack(self, value: Any, backend: str = "compute", op: str = "dispatch") -> bytes:
        """`value` as the block's bytes (see the module docstring for what it may be)."""
        kind = type(value)
        if kind is dict and self._positional is not None:
            keys, order = self._keys
            if value.keys() == keys:  # params by name, the usual call: in field order, through the one-call path
                value, kind = [value[name] for name in order], list
        if kind is tuple or kind is list:
            fast = self._positional
            if fast is not None and len(value) == len(fast[1]):
                for v, ok in zip(value, fast[1]):
                    if type(v) not in ok:
                        break
                else:
                    try:
                        return fast[0].pack(*value)
                    except (_PackError, OverflowError):
                        pass  # a value out of range: the field-by-field path below names it
        if isinstance(value, (bytes, bytearray, memoryview)):
            raw = bytes(value)
            if len(raw) != self.size:
                raise InvalidArgument(backend, op, detail=f"params bytes: {len(raw)} given, the block is "
                                      f"{self.size} bytes")
            return raw
        out = bytearray(self.size)
        if type(value) is tuple or type(value) is list:
            fields = self.struct.fields
            if len(value) != len(fields):
                raise InvalidArgument(backend, op, detail=f"params: {len(value)} values given, the block has "
                                      f"{len(fields)} fields ({', '.join(self.names)})")
            for f, v in zip(fields, value):
                _put(out, f.offset, f.type, v, f.name, backend, op)
            return bytes(out)
        _put(out, 0, self.struct, value, "params", backend, op)
        return bytes(out)


def _numpy(kind: Any) -> np.dtype:
    if isinstance(kind, Scalar):
        if kind.dtype is DType.BOOL and kind.size == 4:
            return np.dtype(np.uint32)
        return np.dtype(kind.dtype.numpy)
    if isinstance(kind, Vector):
        return np.dtype((kind.dtype.numpy, (kind.count,)))
    if isinstance(kind, Array):
        element = _numpy(kind.element)
        if element.itemsize != kind.stride:  # padded elements: a struct of the element at offset 0
            element = np.dtype({"names": ["value"], "formats": [element], "offsets": [0], "itemsize": kind.stride})
        return np.dtype((element, (kind.count,)))
    return np.dtype({"names": [f.name for f in kind.fields], "formats": [_numpy(f.type) for f in kind.fields],
                     "offsets": [f.offset for f in kind.fields], "itemsize": kind.size})


def _describe(kind: Any, base: int, path: str, lines: list[str]) -> None:
    if isinstance(kind, Struct):
        for f in kind.fields:
            _describe(f.type, base + f.offset, f"{path}.{f.name}" if path else f.name, lines)
    else:
        lines.append(f"{base:5d} {path}: {kind}")


def _fail(backend: str, op: str, where: str, detail: str) -> InvalidArgument:
    return InvalidArgument(backend, op, detail=f"params field {where}: {detail}")


def _members(value: Any, kind: Struct, where: str, backend: str, op: str) -> Mapping[str, Any]:
    """A struct value by member name: a dict, a numpy structured scalar, a dataclass or a named tuple."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, np.ndarray) and value.dtype.names and value.size == 1:
        value = value.reshape(())[()]
    if isinstance(value, np.void) and value.dtype.names:
        return {name: value[name] for name in value.dtype.names}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if hasattr(value, "_asdict"):
        return value._asdict()  # type: ignore[no-any-return]
    names = ", ".join(f.name for f in kind.fields)
    raise _fail(backend, op, where, f"expected the fields {names} by name (a dict, a numpy structured scalar or a "
                f"dataclass), got {type(value).__name__}")


def _put(out: bytearray, offset: int, kind: Any, value: Any, where: str, backend: str, op: str) -> None:
    if isinstance(kind, Scalar):
        _put_scalar(out, offset, kind, value, where, backend, op)
    elif isinstance(kind, Vector):
        items = _items(value, kind.count, where, backend, op, str(kind))
        element = Scalar(kind.dtype)
        for i, item in enumerate(items):
            _put_scalar(out, offset + i * kind.dtype.itemsize, element, item, f"{where}[{i}]", backend, op)
    elif isinstance(kind, Array):
        items = _items(value, kind.count, where, backend, op, str(kind))
        for i, item in enumerate(items):
            _put(out, offset + i * kind.stride, kind.element, item, f"{where}[{i}]", backend, op)
    else:
        members = _members(value, kind, where, backend, op)
        known = {f.name for f in kind.fields}
        unknown = [k for k in members if k not in known]
        if unknown:
            raise _fail(backend, op, where, f"no field named {unknown[0]!r}; the shader declares "
                        f"{', '.join(f.name for f in kind.fields)}")
        for f in kind.fields:
            if f.name not in members:
                raise _fail(backend, op, where, f"missing {f.name!r} ({f.type}); every field must be given")
            _put(out, offset + f.offset, f.type, members[f.name], f"{where}.{f.name}" if where != "params"
                 else f.name, backend, op)


def _items(value: Any, count: int, where: str, backend: str, op: str, what: str) -> Sequence[Any]:
    if isinstance(value, np.ndarray):
        if value.dtype.names == ("value",):  # padded array elements (see `_numpy`)
            value = value["value"]
        items: Sequence[Any] = list(value) if value.ndim else [value[()]]
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        raise _fail(backend, op, where, f"expected {count} values ({what}), got {type(value).__name__}")
    if len(items) != count:
        raise _fail(backend, op, where, f"expected {count} values ({what}), got {len(items)}")
    return items


def _put_scalar(out: bytearray, offset: int, kind: Scalar, value: Any, where: str, backend: str, op: str) -> None:
    dtype = kind.dtype
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if dtype is DType.BOOL:
        if not isinstance(value, (bool, np.bool_)):
            raise _fail(backend, op, where, f"expected a bool, got {value!r}")
        pack_into("<I" if kind.size == 4 else "<?", out, offset, bool(value))
        return
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _fail(backend, op, where, f"expected a number for {dtype.value}, got {value!r}")
    if dtype in _FLOATS:
        if isinstance(value, np.floating) and value.dtype.itemsize > dtype.itemsize:
            raise _fail(backend, op, where, f"{value.dtype} into a {dtype.value} field would lose precision; "
                        f"convert it yourself (np.{dtype.value}(value)) if that is meant")
        number = float(value)
        if dtype is not DType.FLOAT64 and math.isfinite(number) and \
                abs(number) > (65504.0 if dtype is DType.FLOAT16 else 3.4028234663852886e38):
            raise _fail(backend, op, where, f"{value!r} does not fit {dtype.value}")
        pack_into("<" + _CODES[dtype], out, offset, number)
        return
    if isinstance(value, (float, np.floating)):
        raise _fail(backend, op, where, f"expected an integer for {dtype.value}, got the float {value!r}")
    code = _CODES.get(dtype)
    if code is None:
        raise _fail(backend, op, where, f"{dtype.value} params are not supported")
    low, high = _INT_RANGES[dtype]
    number = int(value)
    if not low <= number <= high:
        raise _fail(backend, op, where, f"{number} does not fit {dtype.value} ({low}..{high})")
    pack_into("<" + code, out, offset, number)


# -- WGSL --------------------------------------------------------------------------------------------------

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_WGSL_SCALARS = {"f32": DType.FLOAT32, "i32": DType.INT32, "u32": DType.UINT32, "f16": DType.FLOAT16,
                 "bool": DType.BOOL, "f64": DType.FLOAT64}
_WGSL_SHORT = {"f": DType.FLOAT32, "i": DType.INT32, "u": DType.UINT32, "h": DType.FLOAT16}
_WGSL_STRUCT = re.compile(r"\bstruct\s+(\w+)\s*\{([^}]*)\}")
_WGSL_MEMBER = re.compile(r"^((?:@\s*\w+\s*\([^)]*\)\s*)*)(\w+)\s*:\s*(.+)$", re.S)
_WGSL_UNIFORM = re.compile(r"((?:@\s*\w+\s*\([^)]*\)\s*)+)var\s*<\s*uniform\s*>\s*(\w+)\s*:\s*([^;]+);")
_WGSL_OVERRIDE = re.compile(r"((?:@\s*\w+\s*\([^)]*\)\s*)*)override\s+(\w+)\s*(?::\s*(\w+))?\s*(?:=\s*([^;]+))?;")
_ATTR = re.compile(r"@\s*(\w+)\s*\(\s*([^)]*?)\s*\)")


class _Unreadable(Exception):
    """A declaration the parser does not understand."""


def _wgsl_type(text: str, structs: Mapping[str, str], rule: str, depth: int = 0) -> ParamType:
    text = " ".join(text.split())
    if text in _WGSL_SCALARS:
        return Scalar(_WGSL_SCALARS[text], 4 if text == "bool" else 0)
    vec = re.fullmatch(r"vec([234])\s*<\s*(\w+)\s*>|vec([234])([fiuh])", text)
    if vec:
        count = int(vec.group(1) or vec.group(3))
        dtype = _WGSL_SCALARS.get(vec.group(2) or "") or _WGSL_SHORT[vec.group(4)]
        return Vector(dtype, count)
    arr = re.fullmatch(r"array\s*<\s*(.+)\s*,\s*(\d+)u?\s*>", text)
    if arr:
        return array_of(_wgsl_type(arr.group(1), structs, rule, depth), int(arr.group(2)), rule)
    if text in structs and depth < 16:
        return _wgsl_struct(text, structs, rule, depth + 1)
    raise _Unreadable(text)


def _wgsl_struct(name: str, structs: Mapping[str, str], rule: str, depth: int = 0) -> Struct:
    members, explicit = [], {}
    for part in structs[name].split(","):
        part = part.strip()
        if not part:
            continue
        member = _WGSL_MEMBER.match(part)
        if not member:
            raise _Unreadable(part)
        attrs = dict(_ATTR.findall(member.group(1)))
        members.append((member.group(2), _wgsl_type(member.group(3), structs, rule, depth)))
        if "align" in attrs or "size" in attrs:
            explicit[member.group(2)] = (int(attrs["align"]) if "align" in attrs else None,
                                         int(attrs["size"]) if "size" in attrs else None)
    return layout_struct(name, members, rule, explicit)


def wgsl_params(code: str) -> tuple[int, ParamBlock] | None:
    """(binding, block) of the `var<uniform>` of group 0 in WGSL source, or None where there is none or it is
    not readable (a type alias, an unknown type)."""
    text = _COMMENTS.sub(" ", code)
    structs = {m.group(1): m.group(2) for m in _WGSL_STRUCT.finditer(text)}
    for match in _WGSL_UNIFORM.finditer(text):
        attrs = dict(_ATTR.findall(match.group(1)))
        if attrs.get("group", "0") != "0" or "binding" not in attrs:
            continue
        type_text = match.group(3).strip()
        try:
            if type_text in structs:
                block = _wgsl_struct(type_text, structs, "wgsl-uniform")
            else:
                block = layout_struct(match.group(2), [(match.group(2), _wgsl_type(type_text, structs,
                                                                                  "wgsl-uniform"))],
                                      "wgsl-uniform")
        except _Unreadable:
            return None
        return int(attrs["binding"]), ParamBlock(block, "wgsl-uniform")
    return None


def wgsl_overrides(code: str) -> tuple[ConstantInfo, ...]:
    """The `override` declarations of WGSL source: name, @id, type and default (as written, or None)."""
    found = []
    for match in _WGSL_OVERRIDE.finditer(_COMMENTS.sub(" ", code)):
        attrs = dict(_ATTR.findall(match.group(1)))
        kind = _WGSL_SCALARS.get(match.group(3) or "")
        default = _literal(match.group(4))
        found.append(ConstantInfo(match.group(2), int(attrs["id"]) if "id" in attrs else None, kind, default))
    return tuple(found)


def _literal(text: str | None) -> Any:
    if text is None:
        return None
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    number = re.fullmatch(r"(-?[0-9.eE+-]+?)([fhiu]|lf)?", text)
    if number:
        try:
            return int(number.group(1)) if re.fullmatch(r"-?\d+", number.group(1)) else float(number.group(1))
        except ValueError:
            return None
    return None


# -- GLSL --------------------------------------------------------------------------------------------------

_GLSL_SCALARS = {"float": DType.FLOAT32, "int": DType.INT32, "uint": DType.UINT32, "double": DType.FLOAT64,
                 "bool": DType.BOOL, "float16_t": DType.FLOAT16, "float32_t": DType.FLOAT32,
                 "float64_t": DType.FLOAT64, "int8_t": DType.INT8, "uint8_t": DType.UINT8, "int16_t": DType.INT16,
                 "uint16_t": DType.UINT16, "int32_t": DType.INT32, "uint32_t": DType.UINT32,
                 "int64_t": DType.INT64, "uint64_t": DType.UINT64}
_GLSL_VECTORS = {"": DType.FLOAT32, "i": DType.INT32, "u": DType.UINT32, "d": DType.FLOAT64, "b": DType.BOOL,
                 "f16": DType.FLOAT16, "f64": DType.FLOAT64, "i64": DType.INT64, "u64": DType.UINT64}
_GLSL_STRUCT = re.compile(r"\bstruct\s+(\w+)\s*\{([^}]*)\}\s*;")
_GLSL_UNIFORM = re.compile(r"layout\s*\(([^)]*)\)\s*uniform\s+(\w+)\s*\{([^}]*)\}\s*(\w*)\s*;")
_GLSL_MEMBER = re.compile(r"^(?:(?:highp|mediump|lowp|layout\s*\([^)]*\))\s+)*(\w+)\s+(\w+)\s*((?:\[\s*\d+\s*\]\s*)*)$")


def _glsl_type(name: str, structs: Mapping[str, str], rule: str, depth: int = 0) -> ParamType:
    if name in _GLSL_SCALARS:
        return Scalar(_GLSL_SCALARS[name], 4 if name == "bool" else 0)
    vec = re.fullmatch(r"(|i|u|d|b|f16|f64|i64|u64)vec([234])", name)
    if vec:
        dtype = _GLSL_VECTORS[vec.group(1)]
        return Vector(DType.UINT32 if dtype is DType.BOOL else dtype, int(vec.group(2)))
    if name in structs and depth < 16:
        return _glsl_struct(name, structs[name], structs, rule, depth + 1)
    raise _Unreadable(name)


def _glsl_struct(name: str, body: str, structs: Mapping[str, str], rule: str, depth: int = 0) -> Struct:
    members: list[tuple[str, ParamType]] = []
    for part in body.split(";"):
        part = " ".join(part.split())
        if not part:
            continue
        match = _GLSL_MEMBER.match(part)
        if not match:
            raise _Unreadable(part)
        kind: ParamType = _glsl_type(match.group(1), structs, rule, depth)
        for dim in reversed(re.findall(r"\d+", match.group(3))):
            kind = array_of(kind, int(dim), rule)
        members.append((match.group(2), kind))
    return layout_struct(name, members, rule)


def glsl_params(code: str) -> tuple[int | None, ParamBlock] | None:
    """(binding, block) of the first uniform block of GLSL source (binding None for a push_constant block), laid out
    std140 (std430 for push constants); None where there is none, or where a macro or type is not readable."""
    text = _COMMENTS.sub(" ", code)
    if "#define" in text:
        return None  # a macro may rename types or sizes
    structs = {m.group(1): m.group(2) for m in _GLSL_STRUCT.finditer(text)}
    match = _GLSL_UNIFORM.search(text)
    if not match:
        return None
    qualifiers = match.group(1)
    push = "push_constant" in qualifiers
    rule = "std430" if push or "std430" in qualifiers else "std140"
    binding = re.search(r"\bbinding\s*=\s*(\d+)", qualifiers)
    try:
        block = _glsl_struct(match.group(2), match.group(3), structs, rule)
    except _Unreadable:
        return None
    return (None if push else int(binding.group(1)) if binding else 0), ParamBlock(block, rule)


# -- C / CUDA C++ / HIP ------------------------------------------------------------------------------------

_C_SCALARS = {"float": DType.FLOAT32, "double": DType.FLOAT64, "int": DType.INT32, "unsigned": DType.UINT32,
              "unsigned int": DType.UINT32, "signed int": DType.INT32, "short": DType.INT16,
              "unsigned short": DType.UINT16, "char": DType.INT8, "signed char": DType.INT8,
              "unsigned char": DType.UINT8, "long long": DType.INT64, "long long int": DType.INT64,
              "unsigned long long": DType.UINT64, "unsigned long long int": DType.UINT64, "long": DType.INT64,
              "unsigned long": DType.UINT64, "bool": DType.BOOL, "__half": DType.FLOAT16, "half": DType.FLOAT16,
              "int8_t": DType.INT8, "uint8_t": DType.UINT8, "int16_t": DType.INT16, "uint16_t": DType.UINT16,
              "int32_t": DType.INT32, "uint32_t": DType.UINT32, "int64_t": DType.INT64, "uint64_t": DType.UINT64,
              "size_t": DType.UINT64}
_C_VECTORS = {"float": DType.FLOAT32, "double": DType.FLOAT64, "int": DType.INT32, "uint": DType.UINT32,
              "longlong": DType.INT64, "ulonglong": DType.UINT64, "short": DType.INT16, "ushort": DType.UINT16}
_C_STRUCT = re.compile(r"\b(?:typedef\s+)?struct\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?(\w*)\s*\{([^}]*)\}\s*(\w*)\s*;")
_C_KERNEL = r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+{name}\s*\(([^)]*)\)"


def _c_type(text: str, structs: Mapping[str, str], depth: int = 0) -> ParamType:
    text = " ".join(text.replace("const ", " ").replace("volatile ", " ").split())
    text = re.sub(r"^(?:struct|::)\s*", "", text)
    if text in _C_SCALARS:
        return Scalar(_C_SCALARS[text])
    vec = re.fullmatch(r"(float|double|int|uint|longlong|ulonglong|short|ushort)([234])", text)
    if vec:
        return Vector(_C_VECTORS[vec.group(1)], int(vec.group(2)))
    if text in structs and depth < 16:
        return _c_struct(text, structs[text], structs, depth + 1)
    raise _Unreadable(text)


def _c_struct(name: str, body: str, structs: Mapping[str, str], depth: int = 0) -> Struct:
    members: list[tuple[str, ParamType]] = []
    for part in body.split(";"):
        part = " ".join(part.split())
        if not part:
            continue
        match = re.fullmatch(r"(.+?)\s*\b(\w+)\s*((?:\[\s*\d+\s*\]\s*)*)", part)
        if not match or "*" in match.group(1) or "," in part:
            raise _Unreadable(part)
        kind: ParamType = _c_type(match.group(1), structs, depth)
        for dim in reversed(re.findall(r"\d+", match.group(3))):
            kind = array_of(kind, int(dim), "c")
        members.append((match.group(2), kind))
    return layout_struct(name, members, "c")


def c_params(code: str, entry: str, buffers: int) -> ParamBlock | None:
    """The by-value arguments after the first `buffers` pointer arguments of kernel `entry` in CUDA/HIP C++
    source, as a block laid out like the kernel's parameter buffer (each argument at its C alignment); None
    where the signature is not readable (templates, macros, a type this parser does not know)."""
    text = _COMMENTS.sub(" ", code)
    match = re.search(_C_KERNEL.format(name=re.escape(entry)), text)
    if not match:
        return None
    structs: dict[str, str] = {}
    for s in _C_STRUCT.finditer(text):
        for name in (s.group(1), s.group(3)):
            if name:
                structs[name] = s.group(2)
    args = [a.strip() for a in match.group(1).split(",") if a.strip()]
    if args == ["void"]:
        args = []
    if len(args) < buffers or any("*" not in a for a in args[:buffers]):
        return None
    members: list[tuple[str, ParamType]] = []
    try:
        for arg in args[buffers:]:
            arg = " ".join(arg.replace("__restrict__", " ").split())
            parts = re.fullmatch(r"(.+?)\s*\b(\w+)", arg)
            if not parts or "*" in arg or "&" in arg:
                return None
            members.append((parts.group(2), _c_type(parts.group(1), structs)))
    except _Unreadable:
        return None
    return ParamBlock(layout_struct(entry, members, "c"), "c")
