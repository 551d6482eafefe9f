"""Slang's reflection JSON (`slangc -reflection-json`) as ironaccel's interface: buffers and the params block.

The kernel contract: every buffer and value is a `uniform` parameter of the entry point (the kernel's
signature), so that each target gets them the same way -- storage buffers in declaration order (the dispatch
order) and the values in one block (Vulkan push constants, a WGSL or GL uniform block, CUDA kernel arguments).
Global shader parameters are refused: Slang gives them a different home per target (a CUDA `__constant__`
struct, a uniform buffer Vulkan pipelines here do not bind).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ironaccel import DType
from ironaccel.compute import Array, BindingInfo, Field, ParamBlock, Scalar, Struct, Vector
from ironaccel.compute.params import ParamType, array_of, layout_struct
from ironaccel.errors import CompileError, Unsupported

__all__ = ["Buffer", "Value", "Kernel", "read", "leaves"]

_SCALARS = {"float16": DType.FLOAT16, "float32": DType.FLOAT32, "float64": DType.FLOAT64, "int8": DType.INT8,
            "uint8": DType.UINT8, "int16": DType.INT16, "uint16": DType.UINT16, "int32": DType.INT32,
            "uint32": DType.UINT32, "int64": DType.INT64, "uint64": DType.UINT64}
_BUFFER_SHAPES = ("structuredBuffer", "byteAddressBuffer")


@dataclass(frozen=True)
class Buffer:
    """One buffer parameter: its name, the binding (or CUDA argument offset) slangc gave it, element, access."""

    name: str
    binding: int
    element: DType | None
    writable: bool


@dataclass(frozen=True)
class Value:
    """One value parameter: its name, its offset in slangc's layout, its type (offsets inside as slangc laid out)."""

    name: str
    offset: int
    type: ParamType
    json: dict[str, Any]


@dataclass(frozen=True)
class Kernel:
    """An entry point as reflected: buffers in dispatch order, values in order, the workgroup size."""

    entry: str
    buffers: tuple[Buffer, ...]
    values: tuple[Value, ...]
    workgroup_size: tuple[int, int, int] | None

    def bindings(self) -> tuple[BindingInfo, ...]:
        """The buffers as the kit's BindingInfo, slot i at vendor binding i (what the targets are made to use)."""
        return tuple(BindingInfo(b.name, i, b.element, b.writable) for i, b in enumerate(self.buffers))

    def block(self, rule: str | None, layout: str) -> ParamBlock | None:
        """The values as a ParamBlock: offsets as slangc laid them out (`rule` None), or laid out anew by `rule`
        ("std140", "c") where the target's code holds them differently; `layout` names it.  With slangc's
        offsets, a push-constant block ("std430") ends at its last byte (the push range the module declares);
        a uniform block is padded to its alignment."""
        if not self.values:
            return None
        if rule is None:
            fields = tuple(Field(v.name, v.offset, v.type) for v in self.values)
            if layout == "std430":  # the last byte any member holds: a struct's tail padding is not pushed
                whole = Struct(self.entry, fields, 0)
                end, align = max(off + DType(kind).itemsize for off, kind in leaves(whole)), 4
            else:
                end = max(f.offset + f.type.size for f in fields)
                align = max(_alignment(v.json) for v in self.values)
            return ParamBlock(Struct(self.entry, fields, -(-end // align) * align), layout)
        members = [(v.name, _relayout(v.type, rule)) for v in self.values]
        return ParamBlock(layout_struct(self.entry, members, rule), layout)


def read(backend: str, reflection: dict[str, Any], entry: str) -> Kernel:
    """The entry point `entry` of a reflection JSON (Unsupported for what the kernel contract excludes)."""
    for param in reflection.get("parameters", ()):
        raise Unsupported(backend, "pipeline", f"the Slang source declares a global shader parameter "
                          f"{param.get('name')!r}; declare every buffer and value as a `uniform` parameter of the "
                          f"entry point instead (each backend then receives it the same way)")
    points = [p for p in reflection.get("entryPoints", ()) if p.get("stage") == "compute"]
    if len(points) != 1:
        raise CompileError(backend, "slangc", f"expected one compute entry point {entry!r} in slangc's reflection, "
                           f"found {[p.get('name') for p in points]}")
    point = points[0]
    buffers: list[Buffer] = []
    values: list[Value] = []
    for param in point.get("parameters", ()):
        name, binding, kind = param.get("name", ""), param.get("binding"), param.get("type", {})
        if binding is None or param.get("semanticName"):
            continue  # a system value (SV_DispatchThreadID, ...)
        if kind.get("kind") == "resource":
            if kind.get("baseShape") not in _BUFFER_SHAPES:
                raise Unsupported(backend, "pipeline", f"Slang parameter {name!r} is a {kind.get('baseShape')}; "
                                  f"ComputeDevice pipelines bind buffers only ({', '.join(_BUFFER_SHAPES)})")
            result = kind.get("resultType", {})
            element = _SCALARS.get(result.get("scalarType", "")) if result.get("kind") == "scalar" else \
                _SCALARS.get(result.get("elementType", {}).get("scalarType", "")) if result.get("kind") == "vector" \
                else None
            index = binding.get("index", binding.get("offset", len(buffers)))
            buffers.append(Buffer(name, int(index), element, kind.get("access") in ("readWrite", "write")))
        elif binding.get("kind") == "uniform":
            values.append(Value(name, int(binding.get("offset", 0)), _type(backend, name, kind), kind))
        else:
            raise Unsupported(backend, "pipeline", f"Slang parameter {name!r} has a {binding.get('kind')} binding, "
                              "which ComputeDevice pipelines do not bind")
    size = point.get("threadGroupSize")
    workgroup = (int(size[0]), int(size[1]), int(size[2])) if isinstance(size, Sequence) and len(size) == 3 else None
    return Kernel(point.get("name", entry), tuple(buffers), tuple(values), workgroup)


def _alignment(kind: dict[str, Any]) -> int:
    for size in kind.get("sizes", ()):
        if size.get("kind") == "uniform":
            return int(size.get("alignment", 4))
    return 4


def _uniform_size(kind: dict[str, Any]) -> int | None:
    for size in kind.get("sizes", ()):
        if size.get("kind") == "uniform":
            return int(size["value"])
    return None


def _type(backend: str, where: str, kind: dict[str, Any]) -> ParamType:
    """A reflected type as a ParamType, with the offsets and strides slangc gave its members."""
    what = kind.get("kind")
    if what == "scalar":
        dtype = _SCALARS.get(kind.get("scalarType", ""))
        if dtype is not None:
            return Scalar(dtype)
    elif what == "vector":
        dtype = _SCALARS.get(kind.get("elementType", {}).get("scalarType", ""))
        count = int(kind.get("elementCount", 0))
        if dtype is not None and 2 <= count <= 4:
            return Vector(dtype, count)
    elif what == "array":
        element = _type(backend, f"{where}[]", kind.get("elementType", {}))
        count = int(kind.get("elementCount", 0))
        if count > 0:
            return Array(element, count, int(kind.get("uniformStride") or element.size))
    elif what == "struct":
        fields = []
        for f in kind.get("fields", ()):
            member = f.get("name", "")
            fields.append(Field(member, int(f.get("binding", {}).get("offset", 0)),
                                _type(backend, f"{where}.{member}", f.get("type", {}))))
        size = _uniform_size(kind) or max((f.offset + f.type.size for f in fields), default=0)
        return Struct(kind.get("name", ""), tuple(fields), size)
    raise Unsupported(backend, "pipeline", f"Slang parameter {where!r} has a type ({what} "
                      f"{kind.get('scalarType') or kind.get('name') or ''}) that ironaccel's params do not carry; "
                      "use scalars, vectors, arrays and structs of them")


def _relayout(kind: ParamType, rule: str) -> ParamType:
    """`kind` laid out anew by `rule` (members in order, their offsets and strides recomputed)."""
    if isinstance(kind, Struct):
        return layout_struct(kind.name, [(f.name, _relayout(f.type, rule)) for f in kind.fields], rule)
    if isinstance(kind, Array):
        return array_of(_relayout(kind.element, rule), kind.count, rule)
    return kind


def leaves(kind: ParamType, base: int = 0) -> list[tuple[int, str]]:
    """Every scalar of a type as (offset, type), names aside: how two layouts of one block are compared."""
    if isinstance(kind, Scalar):
        return [(base, kind.dtype.value)]
    if isinstance(kind, Vector):
        return [(base + i * kind.dtype.itemsize, kind.dtype.value) for i in range(kind.count)]
    if isinstance(kind, Array):
        return [leaf for i in range(kind.count) for leaf in leaves(kind.element, base + i * kind.stride)]
    return [leaf for f in kind.fields for leaf in leaves(f.type, base + f.offset)]
