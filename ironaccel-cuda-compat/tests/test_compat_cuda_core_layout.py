"""StridedMemoryView._layout without a GPU: what numba-cuda 0.30 reads from a view it launches or types.

numba-cuda packs a kernel's array argument from `view._layout.strides_in_bytes` (None: it derives C-order
strides from the shape and `is_contiguous_c`) and types a view from `is_contiguous_c` / `_f` / `_any`; the
values below are cuda.core 1.2's for the same layouts (None strides mean C-contiguous, axes of extent 1 never
break contiguity, an empty tensor is contiguous in every order).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ironaccel_cuda_compat.cuda_core._layout import _StridedLayout
from ironaccel_cuda_compat.cuda_core.utils import StridedMemoryView

BASE = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)


def _flags(layout: _StridedLayout) -> tuple[bool, bool, bool]:
    return layout.is_contiguous_c, layout.is_contiguous_f, layout.is_contiguous_any


@pytest.mark.parametrize(("array", "strides_in_bytes", "flags"), [
    (BASE, (48, 16, 4), (True, False, True)),
    (np.asfortranarray(BASE), (4, 8, 24), (False, True, True)),
    (BASE.transpose(2, 0, 1), (4, 48, 16), (False, False, True)),  # dense, in neither C nor F order
    (BASE[:, ::2, 1:], (48, 32, 4), (False, False, False)),  # gaps: numba refuses to type it
    (BASE[:, :, 0], (48, 16), (False, False, False)),
    (np.broadcast_to(np.arange(3.0), (2, 3)), (0, 8), (False, False, False)),
    (np.zeros((1, 5, 1)), (40, 8, 8), (True, True, True)),  # extent-1 axes do not count
    (np.zeros((0, 3)), (0, 0), (True, True, True)),  # empty: contiguous in every order
])
def test_layout_of_a_dlpack_view_is_cuda_cores(array, strides_in_bytes, flags):
    view = StridedMemoryView.from_dlpack(array, stream_ptr=-1)
    layout = view._layout
    assert isinstance(layout, _StridedLayout)
    assert layout.shape == view.shape and layout.strides == view.strides and layout.itemsize == array.itemsize
    assert layout.strides_in_bytes == strides_in_bytes == array.strides
    assert _flags(layout) == flags
    assert view._layout is layout  # made once


def test_layout_without_strides_is_implicitly_c_contiguous():
    # NumPy's array interface gives no strides for a C-contiguous array; numba then computes them from the shape.
    view = StridedMemoryView.from_array_interface(BASE)
    layout = view._layout
    assert view.strides is None and layout.strides is None and layout.strides_in_bytes is None
    assert _flags(layout) == (True, False, True) and layout.is_dense and layout.volume == 24
    assert repr(layout) == "_StridedLayout(shape=(2, 3, 4), strides=None, itemsize=4)"
    row = StridedMemoryView.from_array_interface(np.zeros((1, 7, 1), np.int16))._layout
    assert row.strides is None and _flags(row) == (True, True, True)  # one axis above extent 1: F as well
    scalar = StridedMemoryView.from_array_interface(np.array(3.0))._layout
    assert scalar.shape == () and scalar.strides_in_bytes is None and _flags(scalar) == (True, True, True)
    record = np.zeros(3, dtype=[("a", "i4"), ("b", "f8")])
    assert StridedMemoryView.from_array_interface(record)._layout.itemsize == record.itemsize


def test_layout_follows_a_dtype_view():
    view = StridedMemoryView.from_dlpack(np.zeros((4, 6), np.float32), stream_ptr=-1).view(dtype=np.complex64)
    assert view._layout.shape == (4, 3) and view._layout.itemsize == 8 and view._layout.strides_in_bytes == (24, 8)


def test_layout_is_refused_where_the_view_cannot_have_one():
    with pytest.raises(ValueError, match="Cannot infer layout"):
        StridedMemoryView()._layout  # noqa: B018


def test_layout_is_made_once_across_threads():
    view = StridedMemoryView.from_dlpack(BASE, stream_ptr=-1)
    seen: list[tuple[int, ...] | None] = []
    threads = [threading.Thread(target=lambda: seen.append(view._layout.strides_in_bytes)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [(48, 16, 4)] * 8


def test_strided_layout_checks_and_properties():
    with pytest.raises(ValueError, match="non-negative"):
        _StridedLayout((2, -1), None, 4)
    with pytest.raises(ValueError, match="itemsize must be positive"):
        _StridedLayout((2,), None, 0)
    with pytest.raises(ValueError, match="same length as shape"):
        _StridedLayout((2, 3), (1,), 4)
    with pytest.raises(ValueError, match="divisible by itemsize"):
        _StridedLayout((2,), (6,), 4, divide_strides=True)
    assert _StridedLayout((2, 3), (12, 4), 4, divide_strides=True).strides == (3, 1)
    a = _StridedLayout((2, 3), (3, 1), 4)
    assert a == _StridedLayout((2, 3), (3, 1), 4) and a != _StridedLayout((2, 3), None, 4)
    assert a.ndim == 2 and a.stride_order == (0, 1) and a.offset_bounds == (0, 5) and a.required_size_in_bytes() == 24
    back = _StridedLayout((3,), (-2,), 4)
    assert back.offset_bounds == (-4, 0) and not back.is_contiguous_any
    with pytest.raises(ValueError, match="negative offset"):
        back.required_size_in_bytes()
    assert not _StridedLayout((2, 3), (0, 1), 8).is_unique and _StridedLayout((2, 3), (1, 2), 8).is_unique
    assert _StridedLayout((0, 3), (5, 7), 1).offset_bounds == (0, -1)
