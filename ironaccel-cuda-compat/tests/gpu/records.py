"""Records with a custom itemsize, in C (typedef'd structs with a trailing alignment) and as numpy dtypes.

Shared by tests/test_pycuda_compat.py (the layout NVRTC gives, from PTX) and tests/gpu/test_pycuda_compat.py
(kernels writing such records, read back through the dtypes).
"""

from __future__ import annotations

import numpy as np

RECORDS = r"""
#define ALIGN(bytes) __align__(bytes)
#define OFFSET(type, field) ((int)(unsigned long long)&(((type *)0)->field))  /* some NVRTC reject __builtin_offsetof */
typedef struct { int val1; char pad; } ALIGN(32) inner_t;
typedef struct { int val1; short val2; inner_t nested; } ALIGN(64) outer_t;
typedef struct { int val1; char pad; } ALIGN(8) in8_t;
typedef struct _o32 { int val1; short val2; in8_t nested; } __attribute__((aligned(32))) out32_t;
__global__ void layout(int *d) {
    d[0] = sizeof(inner_t); d[1] = sizeof(outer_t); d[2] = OFFSET(outer_t, nested);
    d[3] = sizeof(in8_t); d[4] = sizeof(out32_t); d[5] = OFFSET(out32_t, nested);
}
"""


def record_dtypes() -> tuple[np.dtype, np.dtype, np.dtype, np.dtype]:
    """numpy's side of RECORDS, written as reikna writes such records (offsets and itemsize given)."""
    inner = np.dtype({"names": ["val1", "pad"], "formats": ["i4", "i1"], "offsets": [0, 4], "itemsize": 32,
                      "aligned": True})
    outer = np.dtype({"names": ["val1", "val2", "nested"], "formats": ["i4", "i2", inner], "offsets": [0, 4, 32],
                      "itemsize": 64, "aligned": True})
    in8 = np.dtype({"names": ["val1", "pad"], "formats": ["i4", "i1"], "offsets": [0, 4], "itemsize": 8,
                    "aligned": True})
    out32 = np.dtype({"names": ["val1", "val2", "nested"], "formats": ["i4", "i2", in8], "offsets": [0, 4, 8],
                      "itemsize": 32, "aligned": True})
    return inner, outer, in8, out32
