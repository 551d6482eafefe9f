"""Specialization constants as NVRTC defines: what the code declares and how values are written (no GPU needed)."""

from __future__ import annotations

import numpy as np
import pytest

from ironaccel import DType
from ironaccel.errors import InvalidArgument
from ironaccel_cuda.constants import declared_constants, defines, without_defaults

CODE = """
#ifndef SCALE
#define SCALE 1.0f
#endif
#ifndef WIDE
#define WIDE 0.5
#endif
#ifndef BIAS
#define BIAS -3
#endif
#ifndef MASK
#define MASK 0xffu
#endif
#ifndef BIG
#define BIG 1ll
#endif
#ifndef FLAG
#define FLAG true
#endif
#ifndef EXPR
#define EXPR (SCALE * 2)
#endif
extern "C" __global__ void k(float* y) { y[0] = SCALE; }
"""


def test_declared_constants_are_typed_by_their_default():
    found = {c.name: (c.dtype, c.default) for c in declared_constants(CODE)}
    assert found == {"SCALE": (DType.FLOAT32, 1.0), "WIDE": (DType.FLOAT64, 0.5), "BIAS": (DType.INT32, -3),
                     "MASK": (DType.UINT32, 255), "BIG": (DType.INT64, 1), "FLAG": (DType.BOOL, True),
                     "EXPR": (None, "(SCALE * 2)")}
    assert "#ifndef" not in without_defaults(CODE) and "__global__" in without_defaults(CODE)


def test_values_become_literals_of_the_constant_type():
    found, _ = defines("c++", CODE, {"SCALE": 2.5, "WIDE": 3, "BIAS": -(2**31), "MASK": np.uint32(7), "BIG": 2**40,
                                     "FLAG": False, "EXPR": 4})
    assert found == {"SCALE": "2.5f", "WIDE": "3.0", "BIAS": "(-2147483647 - 1)", "MASK": "7u",
                     "BIG": "1099511627776ll", "FLAG": "false", "EXPR": "4"}


@pytest.mark.parametrize("constants", [
    {"NOPE": 1}, {"BIAS": 1.5}, {"BIAS": 2**31}, {"MASK": -1}, {"FLAG": 1}, {"SCALE": True}, {"SCALE": 1e39},
    {"SCALE": float("inf")}, {"SCALE": "x"},
])
def test_values_that_do_not_fit_are_refused(constants):
    with pytest.raises(InvalidArgument) as info:
        defines("c++", CODE, constants)
    assert "pipeline" in str(info.value)


def test_compiled_code_takes_no_constants():
    assert defines("ptx", ".entry k", {}) == ({}, [])
    with pytest.raises(InvalidArgument):
        defines("image", b"\x7fELF", {"SCALE": 1.0})
