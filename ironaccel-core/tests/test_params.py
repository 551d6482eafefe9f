"""Typed params: layout rules against the languages' own, the parsers, and packing by name."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ironaccel.compute.params import (
    Array,
    ParamBlock,
    Scalar,
    Struct,
    Vector,
    c_params,
    glsl_params,
    layout_struct,
    wgsl_overrides,
    wgsl_params,
)
from ironaccel.errors import InvalidArgument
from ironaccel.types import DType

F32, F64, U32, I32 = (Scalar(DType.FLOAT32), Scalar(DType.FLOAT64), Scalar(DType.UINT32), Scalar(DType.INT32))


def offsets(struct: Struct) -> dict[str, int]:
    return {f.name: f.offset for f in struct.fields}


def test_std140_and_std430_follow_the_glsl_rules() -> None:
    members = [("a", F32), ("v3", Vector(DType.FLOAT32, 3)), ("b", F32), ("arr", Array(F32, 3, 4)),
               ("d", F64)]
    # std140: an array of floats has a 16-byte stride, a struct rounds to 16.
    arr140 = layout_struct("S", [("a", F32), ("arr", Array(F32, 3, 16)), ("v2", Vector(DType.FLOAT32, 2))], "std140")
    assert offsets(arr140) == {"a": 0, "arr": 16, "v2": 64} and arr140.size == 80
    s430 = layout_struct("S", members, "std430")
    assert offsets(s430) == {"a": 0, "v3": 16, "b": 28, "arr": 32, "d": 48} and s430.size == 64
    inner = layout_struct("I", [("x", F32)], "std140")
    outer = layout_struct("O", [("a", F32), ("s", inner), ("b", F32)], "std140")
    assert offsets(outer) == {"a": 0, "s": 16, "b": 32}


def test_c_layout_is_natural_alignment() -> None:
    s = layout_struct("K", [("c", Scalar(DType.INT8)), ("d", F64), ("f2", Vector(DType.FLOAT32, 2)),
                            ("f3", Vector(DType.FLOAT32, 3)), ("u", U32)], "c")
    assert offsets(s) == {"c": 0, "d": 8, "f2": 16, "f3": 24, "u": 36} and s.size == 40


def test_wgsl_uniform_struct_with_attributes() -> None:
    code = """
    struct Inner { v: vec3<f32>, }
    struct Params { a: f32, @align(16) b: u32, pair: vec2f, inner: Inner, n: i32 }
    @group(0) @binding(2) var<uniform> params: Params;
    @id(3) override SCALE: f32 = 1.5;
    override COUNT: u32;
    """
    binding, block = wgsl_params(code)  # type: ignore[misc]
    assert binding == 2 and block.layout == "wgsl-uniform"
    assert offsets(block.struct) == {"a": 0, "b": 16, "pair": 24, "inner": 32, "n": 48}
    assert [(c.name, c.id, c.dtype, c.default) for c in wgsl_overrides(code)] == [
        ("SCALE", 3, DType.FLOAT32, 1.5), ("COUNT", None, DType.UINT32, None)]
    assert wgsl_params("@group(0) @binding(0) var<uniform> p: Alias;") is None  # unreadable: no block


def test_glsl_blocks_and_push_constants() -> None:
    binding, block = glsl_params(  # type: ignore[misc]
        "layout(std140, binding = 1) uniform P { float a; vec2 pair; uint n; int k; float w[2]; };")
    assert binding == 1 and block.layout == "std140"
    assert offsets(block.struct) == {"a": 0, "pair": 8, "n": 16, "k": 20, "w": 32} and block.size == 64
    binding, push = glsl_params("layout(push_constant) uniform P { float a; double d; } p;")  # type: ignore[misc]
    assert binding is None and push.layout == "std430" and offsets(push.struct) == {"a": 0, "d": 8}
    assert glsl_params("#define N 4\nlayout(std140) uniform P { float w[N]; };") is None


def test_cuda_signature() -> None:
    code = """
    struct Pair { float lo; float hi; };
    extern "C" __global__ void k(const float* __restrict__ x, float* y, float a, Pair p, double d, unsigned int n) {}
    """
    block = c_params(code, "k", 2)
    assert block is not None and block.names == ("a", "p", "d", "n")
    assert offsets(block.struct) == {"a": 0, "p": 4, "d": 16, "n": 24}
    assert c_params(code, "k", 3) is None  # the third argument is no pointer
    assert c_params(code, "missing", 2) is None
    assert c_params("template<class T> __global__ void k(T* x, T a) {}", "k", 1) is None


@dataclasses.dataclass
class P:
    a: float
    pair: tuple[float, float]
    n: int


def test_pack_by_name_record_dataclass_and_order() -> None:
    block = ParamBlock(layout_struct("P", [("a", F32), ("pair", Vector(DType.FLOAT32, 2)), ("n", U32)], "std430"),
                       "std430")
    expected = np.zeros((), block.numpy_dtype())
    expected["a"], expected["pair"], expected["n"] = 1.5, (2.0, 3.0), 7
    raw = expected.tobytes()
    assert len(raw) == block.size == 24
    assert block.pack({"a": 1.5, "pair": [2.0, 3.0], "n": 7}) == raw
    assert block.pack(expected[()]) == raw
    assert block.pack(P(1.5, (2.0, 3.0), 7)) == raw
    assert block.pack((1.5, np.array([2.0, 3.0], np.float32), np.uint32(7))) == raw
    assert block.pack(raw) == raw
    scalars = ParamBlock(layout_struct("Q", [("a", F32), ("d", F64), ("n", U32)], "c"), "c")
    record = np.zeros((), scalars.numpy_dtype())
    record["a"], record["d"], record["n"] = 1.0, 2.0, 3
    assert scalars.pack((1.0, 2.0, 3)) == record.tobytes()  # the one-call path, padding zeroed


@pytest.mark.parametrize("bad, match", [
    ({"a": 1.0, "pair": (1.0, 2.0)}, "missing 'n'"),
    ({"a": 1.0, "pair": (1.0, 2.0), "n": 1, "z": 0}, "no field named 'z'"),
    ({"a": 1.0, "pair": (1.0,), "n": 1}, "pair: expected 2 values"),
    ({"a": "x", "pair": (1.0, 2.0), "n": 1}, "a: expected a number"),
    ({"a": np.float64(1), "pair": (1.0, 2.0), "n": 1}, "lose precision"),
    ({"a": 1.0, "pair": (1.0, 2.0), "n": -1}, r"n: -1 does not fit uint32"),
    ({"a": 1.0, "pair": (1.0, 2.0), "n": 1.0}, "n: expected an integer"),
    ({"a": True, "pair": (1.0, 2.0), "n": 1}, "a: expected a number"),
    ({"a": 1e39, "pair": (1.0, 2.0), "n": 1}, "does not fit float32"),
    ((1.0, (1.0, 2.0)), "2 values given"),
    (b"\0" * 5, "5 given"),
    (None, "by name"),
    (3, "by name"),
])
def test_pack_refuses_what_does_not_fit(bad: object, match: str) -> None:
    block = ParamBlock(layout_struct("P", [("a", F32), ("pair", Vector(DType.FLOAT32, 2)), ("n", U32)], "std430"),
                       "std430")
    with pytest.raises(InvalidArgument, match=match):
        block.pack(bad, "x", "dispatch")


SCALARS = ParamBlock(layout_struct("S", [("a", F32), ("d", F64), ("n", U32), ("k", I32)], "c"), "c")


def test_a_dict_of_scalars_packs_as_the_field_by_field_path_does() -> None:
    """A dict of an all-scalar block takes the one-call path (by field order); the bytes are the same as the
    path that packs field by field (a dict subclass takes that one), whatever the keys' order."""
    record = np.zeros((), SCALARS.numpy_dtype())
    record["a"], record["d"], record["n"], record["k"] = 1.5, -2.25, 2**32 - 1, -7
    given = {"k": -7, "n": 2**32 - 1, "d": -2.25, "a": 1.5}
    assert SCALARS.pack(given) == record.tobytes()
    assert SCALARS.pack(SlowDict(given)) == record.tobytes()
    assert SCALARS.pack({"a": np.float32(1.5), "d": np.float32(-2.25), "n": np.uint32(2**32 - 1),
                         "k": np.int64(-7)}) == record.tobytes()


class SlowDict(dict):  # type: ignore[type-arg]
    """A mapping the one-call path does not take."""


@pytest.mark.parametrize("bad, match", [
    ({"a": 1.0, "d": 2.0, "n": 1}, "missing 'k'"),
    ({"a": 1.0, "d": 2.0, "n": 1, "k": 0, "z": 0}, "no field named 'z'"),
    ({"a": 1.0, "d": 2.0, "n": 1, "x": 0}, "no field named 'x'"),
    ({"a": 1.0, "d": 2.0, "n": -1, "k": 0}, r"n: -1 does not fit uint32"),
    ({"a": 1.0, "d": 2.0, "n": 1, "k": 2**31}, r"k: 2147483648 does not fit int32"),
    ({"a": 1.0, "d": 2.0, "n": 1.0, "k": 0}, "n: expected an integer"),
    ({"a": 1e39, "d": 2.0, "n": 1, "k": 0}, r"a: 1e\+39 does not fit float32"),
    ({"a": np.float64(1), "d": 2.0, "n": 1, "k": 0}, "a: float64 into a float32 field would lose precision"),
    ({"a": True, "d": 2.0, "n": 1, "k": 0}, "a: expected a number"),
    ({"a": "1", "d": 2.0, "n": 1, "k": 0}, "a: expected a number"),
])
def test_a_dict_of_scalars_is_checked_like_any_params(bad: object, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        SCALARS.pack(bad, "x", "dispatch")


def test_nested_structs_and_arrays_of_structs() -> None:
    inner = layout_struct("I", [("v", Vector(DType.FLOAT32, 3)), ("w", F32)], "std140")
    block = ParamBlock(layout_struct("O", [("items", Array(inner, 2, 16)), ("n", I32)], "std140"), "std140")
    value = {"items": [{"v": (1, 2, 3), "w": 4}, {"v": (5, 6, 7), "w": 8}], "n": -2}
    raw = np.frombuffer(block.pack(value), np.float32)
    assert list(raw[:8]) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert np.frombuffer(block.pack(value), np.int32)[8] == -2
    record = np.frombuffer(block.pack(value), block.numpy_dtype())[0]
    assert block.pack(record) == block.pack(value)
    assert "items" in block.describe() and "n: int32" in block.describe()
