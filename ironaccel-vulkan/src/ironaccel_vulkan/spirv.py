"""SPIR-V as ironaccel accepts it: checked words and a small reflection.

This checks what is cheap and gives the clearest messages: the type and
length of the input, the magic number (either byte order), the header, and
that the instruction stream is well formed.  The reflection then reads what a
pipeline must agree with: entry points and their execution model and local
size, the descriptor bindings with each storage buffer's element type and
whether the shader may write it, and how many bytes of push constants the
code reads.  Full validation follows before the driver sees the module
(`spirv_val`, SPIRV-Tools): drivers assume valid SPIR-V.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ironaccel.compute import StorageBinding
from ironaccel.compute.params import Array, ConstantInfo, Field, ParamBlock, ParamType, Scalar, Struct, Vector
from ironaccel.errors import CompileError, InvalidArgument
from ironaccel.types import DType

from .binding import BACKEND

__all__ = ["MAGIC", "DescriptorBinding", "EntryPoint", "ModuleInfo", "to_words", "reflect"]

MAGIC = 0x07230203
_SWAPPED_MAGIC = 0x03022307

# Opcodes
OP_ENTRY_POINT, OP_EXECUTION_MODE = 15, 16
OP_NAME, OP_MEMBER_NAME = 5, 6
OP_TYPE_INT, OP_TYPE_FLOAT, OP_TYPE_VECTOR, OP_TYPE_MATRIX = 21, 22, 23, 24
OP_TYPE_ARRAY, OP_TYPE_RUNTIME_ARRAY, OP_TYPE_STRUCT, OP_TYPE_POINTER = 28, 29, 30, 32
OP_CONSTANT, OP_VARIABLE, OP_DECORATE, OP_MEMBER_DECORATE = 43, 59, 71, 72
# Operands
MODEL_GLCOMPUTE = 5
MODE_LOCAL_SIZE = 17
DECO_BLOCK, DECO_BUFFER_BLOCK, DECO_ARRAY_STRIDE, DECO_MATRIX_STRIDE = 2, 3, 6, 7
DECO_BUILTIN = 11
DECO_SPEC_ID = 1
OP_TYPE_BOOL = 20
OP_SPEC_TRUE, OP_SPEC_FALSE, OP_SPEC_CONSTANT = 48, 49, 50
DECO_NON_WRITABLE, DECO_BINDING, DECO_DESCRIPTOR_SET, DECO_OFFSET = 24, 33, 34, 35
SC_UNIFORM_CONSTANT, SC_INPUT, SC_UNIFORM, SC_OUTPUT, SC_PUSH_CONSTANT, SC_STORAGE_BUFFER = 0, 1, 2, 3, 9, 12
MODELS = {0: "Vertex", 1: "TessellationControl", 2: "TessellationEvaluation", 3: "Geometry", 4: "Fragment",
          5: "GLCompute", 6: "Kernel"}


@dataclass(frozen=True)
class EntryPoint:
    name: str
    model: int
    local_size: tuple[int, int, int] | None


@dataclass(frozen=True)
class DescriptorBinding:
    """A resource the module binds: set, binding, kind, and for a storage buffer its element type and access."""

    set: int
    binding: int
    kind: str  # "storage", "uniform", "other"
    element: DType | None = None  # a buffer that is one array of a scalar or vector type: that scalar's type
    writable: bool = True  # False where the module declares it NonWritable

    def storage(self) -> StorageBinding:
        return StorageBinding(self.binding, self.element, self.writable)


_INTS = {(8, 1): DType.INT8, (8, 0): DType.UINT8, (16, 1): DType.INT16, (16, 0): DType.UINT16,
         (32, 1): DType.INT32, (32, 0): DType.UINT32, (64, 1): DType.INT64, (64, 0): DType.UINT64}
_FLOATS = {16: DType.FLOAT16, 32: DType.FLOAT32, 64: DType.FLOAT64}
#: The struct codes of the scalar types a specialization constant may have (bool is 4 bytes: a VkBool32).
_SPEC_CODES = {DType.FLOAT16: "e", DType.FLOAT32: "f", DType.FLOAT64: "d", DType.INT8: "b", DType.UINT8: "B",
               DType.INT16: "h", DType.UINT16: "H", DType.INT32: "i", DType.UINT32: "I", DType.INT64: "q",
               DType.UINT64: "Q", DType.BOOL: "I"}


def pack_constants(info: ModuleInfo, constants: dict[Any, Any], op: str = "pipeline") -> list[tuple[int, bytes]]:
    """(SpecId, bytes) for each of `constants` (by name or SpecId), checked against the module's declarations."""
    by_name = {c.name: c for c in info.constants}
    by_id = {c.id: c for c in info.constants}
    out = []
    for key, value in constants.items():
        found = by_id.get(key) if isinstance(key, int) and not isinstance(key, bool) else by_name.get(key)
        if found is None or found.dtype is None:
            have = ", ".join(f"{c.name} (id {c.id})" for c in info.constants) or "none"
            raise InvalidArgument(BACKEND, op, detail=f"the module declares no specialization constant {key!r} "
                                  f"(it has {have})")
        dt = found.dtype
        if dt == DType.BOOL:
            ok = isinstance(value, (bool, np.bool_))
        elif dt in (DType.FLOAT16, DType.FLOAT32, DType.FLOAT64):
            ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
            if ok:  # finite and within the type's range: struct.pack would raise OverflowError past it
                try:
                    ok = abs(float(value)) <= float(np.finfo(dt.numpy).max)
                except OverflowError:  # an int beyond any float
                    ok = False
        else:
            ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
            if ok:
                lo, hi = np.iinfo(dt.numpy).min, np.iinfo(dt.numpy).max
                ok = lo <= int(value) <= hi
        if not ok:
            raise InvalidArgument(BACKEND, op, detail=f"constant {found.name!r} is a {dt.value}, got {value!r}")
        code = _SPEC_CODES[dt]
        out.append((int(found.id or 0), struct.pack("<" + code, bool(value) if dt == DType.BOOL else
                                               float(value) if code in "efd" else int(value))))
    return out


@dataclass(frozen=True)
class ModuleInfo:
    """What a pipeline needs to know about a module."""

    version: tuple[int, int]
    entry_points: dict[str, EntryPoint]
    bindings: tuple[DescriptorBinding, ...]
    push_constant_bytes: int | None  # None: no push-constant block, or one of a size not computed here
    uses_push_constants: bool = False
    words: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, np.uint32))
    #: The push-constant block's members, names, types and offsets (None: no block, or one not readable here).
    push_block: ParamBlock | None = None
    #: Specialization constants (OpSpecConstant* with a SpecId): name (OpName, else the id as text), id, type,
    #: default.
    constants: tuple[ConstantInfo, ...] = ()


def to_words(code: Any, op: str = "pipeline") -> np.ndarray:
    """The code as native-endian uint32 words; InvalidArgument for the wrong kind of input,
    CompileError for input that is not a SPIR-V module."""
    if isinstance(code, str):
        raise InvalidArgument(
            BACKEND, op, detail="Vulkan pipelines take SPIR-V (bytes or uint32 words), not source text; "
            "compile GLSL with `glslangValidator -V file.comp` and pass the .spv bytes"
        )
    if isinstance(code, (bytes, bytearray, memoryview)):
        raw = bytes(code)
        if len(raw) % 4:
            raise CompileError(BACKEND, op, log=f"not SPIR-V: {len(raw)} bytes is not a whole number of 32-bit words")
        words = np.frombuffer(raw, dtype="<u4").astype(np.uint32)
    elif isinstance(code, np.ndarray):
        if code.dtype != np.uint32 or code.ndim != 1:
            raise InvalidArgument(BACKEND, op, detail=f"SPIR-V arrays must be 1-D uint32, got {code.dtype}{code.shape}")
        words = np.ascontiguousarray(code)
    elif isinstance(code, Sequence):
        try:
            as_int = np.asarray(code)
        except (TypeError, ValueError, OverflowError):
            raise InvalidArgument(BACKEND, op, detail="SPIR-V words must be a flat sequence of integers") from None
        if as_int.dtype.kind not in "iu" and as_int.size:
            raise InvalidArgument(BACKEND, op, detail="SPIR-V words must be integers")
        as_int = as_int.astype(np.int64) if as_int.dtype != np.uint64 else as_int
        if as_int.ndim != 1 or (as_int.size and (as_int.min() < 0 or as_int.max() > 0xFFFFFFFF)):
            raise InvalidArgument(BACKEND, op, detail="SPIR-V words must be a flat sequence of 32-bit unsigned ints")
        words = as_int.astype(np.uint32)
    else:
        raise InvalidArgument(BACKEND, op, detail=f"SPIR-V must be bytes or uint32 words, got {type(code).__name__}")
    if words.size < 5:
        raise CompileError(BACKEND, op, log=f"not SPIR-V: {words.size} words is shorter than the 5-word header")
    if words[0] == _SWAPPED_MAGIC:
        words = words.byteswap()
    elif words[0] != MAGIC:
        raise CompileError(BACKEND, op, log=f"not SPIR-V: magic number 0x{int(words[0]):08x}, expected 0x{MAGIC:08x}")
    return words


def _string(words: np.ndarray, start: int, end: int) -> tuple[str, int]:
    """A nul-terminated literal string starting at word `start`; returns it and the next word index."""
    raw = words[start:end].astype("<u4").tobytes()
    nul = raw.find(b"\0")
    if nul < 0:
        raise ValueError("unterminated string")
    return raw[:nul].decode("utf-8", errors="replace"), start + nul // 4 + 1


def _check_compute_interface(variables: list[tuple[int, int, int]], types: dict[int, tuple[int, list[int]]],
                             decorations: dict[int, dict[int, int]], builtin_members: set[int], op: str) -> None:
    """A compute shader's only Input and Output variables are built-ins (Vulkan, "Shader Input and Output
    Interfaces"). spirv-val (2025.5) accepts a user-defined Input there, and NVIDIA's driver 580 then dies with
    SIGSEGV in vkCreateComputePipelines (seen with the module without `OpDecorate %id BuiltIn ...`)."""
    for pointer_type, var_id, storage in variables:
        if storage not in (SC_INPUT, SC_OUTPUT) or DECO_BUILTIN in decorations.get(var_id, {}):
            continue
        pointee = types.get(pointer_type, (0, [0, 0]))[1]
        if len(pointee) >= 2 and pointee[1] in builtin_members:
            continue
        kind = "Input" if storage == SC_INPUT else "Output"
        raise CompileError(BACKEND, op, log=f"invalid SPIR-V for a compute pipeline: variable %{var_id} has storage "
                           f"class {kind} but no BuiltIn decoration; a compute shader's only inputs and outputs are "
                           "built-ins (Vulkan spec, Shader Input and Output Interfaces)")


def reflect(code: Any, op: str = "pipeline") -> ModuleInfo:
    """Validate the module's structure and read its interface; CompileError says what is wrong and where."""
    words = to_words(code, op)
    version = int(words[1])
    major, minor = (version >> 16) & 0xFF, (version >> 8) & 0xFF
    if major != 1 or minor > 6 or version & 0xFF0000FF:
        raise CompileError(BACKEND, op, log=f"not SPIR-V: unsupported version word 0x{version:08x}")
    if int(words[3]) == 0:
        raise CompileError(BACKEND, op, log="malformed SPIR-V: the id bound is 0")

    entries: list[tuple[int, int, str]] = []
    local_sizes: dict[int, tuple[int, int, int]] = {}
    decorations: dict[int, dict[int, int]] = {}
    member_offsets: dict[int, dict[int, int]] = {}
    non_writable_members: dict[int, set[int]] = {}
    builtin_members: set[int] = set()  # structs with a BuiltIn member (gl_PerVertex-like blocks)
    types: dict[int, tuple[int, list[int]]] = {}
    constants: dict[int, int] = {}
    variables: list[tuple[int, int, int]] = []  # (pointer type, id, storage class)
    names: dict[int, str] = {}
    spec_constants: list[tuple[int, int, list[int] | bool]] = []  # (result id, type id, value words or bool)
    member_names: dict[int, dict[int, str]] = {}

    w = words.tolist()
    i, n = 5, len(w)
    try:
        while i < n:
            head = w[i]
            count, opcode = head >> 16, head & 0xFFFF
            if count == 0 or i + count > n:
                raise CompileError(
                    BACKEND, op,
                    log=f"malformed SPIR-V: instruction at word {i} (opcode {opcode}) has word count {count}, "
                    f"{n - i} words remain",
                )
            ops = w[i + 1: i + count]
            if opcode == OP_ENTRY_POINT:
                name, _ = _string(words, i + 3, i + count)
                entries.append((ops[0], ops[1], name))
            elif opcode == OP_NAME and count >= 3:
                names[ops[0]] = _string(words, i + 2, i + count)[0]
            elif opcode == OP_MEMBER_NAME and count >= 4:
                member_names.setdefault(ops[0], {})[ops[1]] = _string(words, i + 3, i + count)[0]
            elif opcode in (OP_SPEC_TRUE, OP_SPEC_FALSE) and len(ops) >= 2:
                spec_constants.append((ops[1], ops[0], opcode == OP_SPEC_TRUE))
            elif opcode == OP_SPEC_CONSTANT and len(ops) >= 3:
                spec_constants.append((ops[1], ops[0], list(ops[2:])))
            elif opcode == OP_TYPE_BOOL and ops:
                types[ops[0]] = (opcode, [])
            elif opcode == OP_EXECUTION_MODE and len(ops) >= 5 and ops[1] == MODE_LOCAL_SIZE:
                local_sizes[ops[0]] = (ops[2], ops[3], ops[4])
            elif opcode == OP_DECORATE and len(ops) >= 2:
                decorations.setdefault(ops[0], {})[ops[1]] = ops[2] if len(ops) > 2 else 1
            elif opcode == OP_MEMBER_DECORATE and len(ops) >= 4 and ops[2] == DECO_OFFSET:
                member_offsets.setdefault(ops[0], {})[ops[1]] = ops[3]
            elif opcode == OP_MEMBER_DECORATE and len(ops) >= 3 and ops[2] == DECO_NON_WRITABLE:
                non_writable_members.setdefault(ops[0], set()).add(ops[1])
            elif opcode == OP_MEMBER_DECORATE and len(ops) >= 3 and ops[2] == DECO_BUILTIN:
                builtin_members.add(ops[0])
            elif opcode in (OP_TYPE_INT, OP_TYPE_FLOAT, OP_TYPE_VECTOR, OP_TYPE_MATRIX, OP_TYPE_ARRAY,
                            OP_TYPE_RUNTIME_ARRAY, OP_TYPE_STRUCT, OP_TYPE_POINTER) and ops:
                types[ops[0]] = (opcode, ops[1:])
            elif opcode == OP_CONSTANT and len(ops) >= 3:
                constants[ops[1]] = ops[2]
            elif opcode == OP_VARIABLE and len(ops) >= 3:
                variables.append((ops[0], ops[1], ops[2]))
            i += count
    except ValueError as exc:
        raise CompileError(BACKEND, op, log=f"malformed SPIR-V near word {i}: {exc}") from None

    entry_points = {
        name: EntryPoint(name, model, local_sizes.get(fn_id)) for model, fn_id, name in entries
    }

    def size_of(type_id: int) -> int | None:
        kind, rest = types.get(type_id, (0, []))
        if kind in (OP_TYPE_INT, OP_TYPE_FLOAT):
            return rest[0] // 8
        if kind == OP_TYPE_VECTOR:
            inner = size_of(rest[0])
            return None if inner is None else inner * rest[1]
        if kind == OP_TYPE_MATRIX:
            stride = decorations.get(type_id, {}).get(DECO_MATRIX_STRIDE)
            column = size_of(rest[0])
            return None if column is None else (stride or column) * rest[1]
        if kind == OP_TYPE_ARRAY:
            stride = decorations.get(type_id, {}).get(DECO_ARRAY_STRIDE)
            length = constants.get(rest[1])
            return None if stride is None or length is None else stride * length
        if kind == OP_TYPE_STRUCT:
            offsets = member_offsets.get(type_id, {})
            end = 0
            for index, member in enumerate(rest):
                member_size = size_of(member)
                if member_size is None or index not in offsets:
                    return None
                end = max(end, offsets[index] + member_size)
            return end
        return None

    def element_of(block: int) -> DType | None:
        """The scalar type of a block that is one array of scalars or vectors."""
        kind, members = types.get(block, (0, []))
        if kind != OP_TYPE_STRUCT or len(members) != 1:
            return None
        kind, rest = types.get(members[0], (0, []))
        if kind not in (OP_TYPE_RUNTIME_ARRAY, OP_TYPE_ARRAY) or not rest:
            return None
        kind, rest = types.get(rest[0], (0, []))
        if kind == OP_TYPE_VECTOR and rest:
            kind, rest = types.get(rest[0], (0, []))
        if kind == OP_TYPE_INT and len(rest) >= 2:
            return _INTS.get((rest[0], rest[1]))
        if kind == OP_TYPE_FLOAT and rest:
            return _FLOATS.get(rest[0])
        return None

    if entries and all(model == MODEL_GLCOMPUTE for model, _, _ in entries):
        _check_compute_interface(variables, types, decorations, builtin_members, op)

    def param_type(type_id: int, depth: int = 0) -> ParamType | None:
        """A params-kit type for a push-constant member, with SPIR-V's own offsets and strides."""
        kind, rest = types.get(type_id, (0, []))
        if depth > 8:
            return None
        if kind == OP_TYPE_INT and len(rest) >= 2 and (rest[0], rest[1]) in _INTS:
            return Scalar(_INTS[(rest[0], rest[1])])
        if kind == OP_TYPE_FLOAT and rest and rest[0] in _FLOATS:
            return Scalar(_FLOATS[rest[0]])
        if kind == OP_TYPE_VECTOR and len(rest) >= 2:
            inner = param_type(rest[0], depth + 1)
            return Vector(inner.dtype, rest[1]) if isinstance(inner, Scalar) else None
        if kind == OP_TYPE_ARRAY and len(rest) >= 2:
            inner = param_type(rest[0], depth + 1)
            stride = decorations.get(type_id, {}).get(DECO_ARRAY_STRIDE)
            length = constants.get(rest[1])
            return None if inner is None or stride is None or length is None else Array(inner, length, stride)
        if kind == OP_TYPE_STRUCT:
            offsets, labels = member_offsets.get(type_id, {}), member_names.get(type_id, {})
            fields = []
            for index, member in enumerate(rest):
                inner = param_type(member, depth + 1)
                if inner is None or index not in offsets or not labels.get(index):
                    return None
                fields.append(Field(labels[index], offsets[index], inner))
            size = size_of(type_id)
            return None if size is None else Struct(names.get(type_id, ""), tuple(fields), size)
        return None

    found_constants = []
    for result, type_id, value in spec_constants:
        spec_id = decorations.get(result, {}).get(DECO_SPEC_ID)
        if spec_id is None:
            continue
        scalar = param_type(type_id)
        if isinstance(value, bool):
            found_constants.append(ConstantInfo(names.get(result) or str(spec_id), spec_id, DType.BOOL, value))
        elif isinstance(scalar, Scalar) and scalar.dtype in _SPEC_CODES:
            raw = np.array(value[: max(1, scalar.size // 4)], np.uint32).tobytes()[: scalar.size]
            default = np.frombuffer(raw, scalar.dtype.numpy)[0].item()
            found_constants.append(ConstantInfo(names.get(result) or str(spec_id), spec_id, scalar.dtype, default))

    bindings: list[DescriptorBinding] = []
    push_block: ParamBlock | None = None
    push_bytes: int | None = None
    uses_push = False
    for pointer_type, var_id, storage in variables:
        pointee = types.get(pointer_type, (0, [0, 0]))[1][1] if types.get(pointer_type) else 0
        if storage == SC_PUSH_CONSTANT:
            uses_push = True
            push_bytes = size_of(pointee)
            found = param_type(pointee)
            push_block = ParamBlock(found, "std430") if isinstance(found, Struct) and found.fields else None
            continue
        deco = decorations.get(var_id, {})
        if DECO_BINDING not in deco:
            continue
        block = decorations.get(pointee, {})
        if storage == SC_STORAGE_BUFFER or (storage == SC_UNIFORM and DECO_BUFFER_BLOCK in block):
            kind = "storage"
        elif storage == SC_UNIFORM:
            kind = "uniform"
        else:
            kind = "other"  # images, samplers: not bound by a ComputeDevice
        members = len(types.get(pointee, (0, []))[1])
        read_only = DECO_NON_WRITABLE in deco or (
            members > 0 and len(non_writable_members.get(pointee, ())) == members)
        bindings.append(DescriptorBinding(deco.get(DECO_DESCRIPTOR_SET, 0), deco[DECO_BINDING], kind,
                                          element_of(pointee) if kind == "storage" else None, not read_only))

    return ModuleInfo(
        version=(major, minor),
        entry_points=entry_points,
        bindings=tuple(sorted(bindings, key=lambda b: (b.set, b.binding))),
        push_constant_bytes=push_bytes,
        uses_push_constants=uses_push,
        words=words,
        push_block=push_block,
        constants=tuple(found_constants),
    )
