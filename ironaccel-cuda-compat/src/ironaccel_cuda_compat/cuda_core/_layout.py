"""cuda.core's `_layout._StridedLayout`: shape, strides (in elements) and itemsize of a strided tensor.

`StridedMemoryView._layout` is one of these, made on first access.  Its clients (numba-cuda's
kernel launch and typing) read `strides_in_bytes` and the `is_contiguous_*` flags; the
properties follow cuda.core 1.2's definitions (strides None: implicitly C-contiguous; axes of
extent 1 never break contiguity; an empty tensor is contiguous in every order).  The layout
constructors and transformations (`dense`, `to_dense`, `permuted`, `reshaped`, `sliced`, ...) are not here;
`slice_offset` is always 0.
"""

from __future__ import annotations

from typing import Any

__all__ = ["_StridedLayout"]

_UNSET: Any = object()


class _StridedLayout:
    """A strided tensor's layout: `shape`, `strides` (elements, or None for C-contiguous) and `itemsize` (bytes)."""

    __slots__ = ("_shape", "_strides", "itemsize", "slice_offset", "_volume", "_c", "_f", "_any", "_sib", "_order")

    def __init__(self, shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int,
                 divide_strides: bool = False) -> None:
        shape_t = tuple(int(n) for n in shape)
        if any(n < 0 for n in shape_t):
            raise ValueError("Extents must be non-negative")
        itemsize = int(itemsize)
        if itemsize <= 0:
            raise ValueError("itemsize must be positive")
        strides_t = None
        if strides is not None:
            strides_t = tuple(int(s) for s in strides)
            if len(strides_t) != len(shape_t):
                raise ValueError(f"Strides, if provided, must have the same length as shape. Shape has "
                                 f"{len(shape_t)} dimensions, but strides has {len(strides_t)} elements.")
            if divide_strides:
                if any(s % itemsize for s in strides_t):
                    raise ValueError("strides must be divisible by itemsize")
                strides_t = tuple(s // itemsize for s in strides_t)
        self._init(shape_t, strides_t, itemsize)

    def _init(self, shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int) -> None:
        self._shape = shape
        self._strides = strides
        self.itemsize = itemsize
        self.slice_offset = 0
        self._volume = self._c = self._f = self._any = self._sib = self._order = _UNSET

    @classmethod
    def _trusted(cls, shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int) -> _StridedLayout:
        """A layout over values the caller has already checked (ints, matching lengths, positive itemsize)."""
        layout = cls.__new__(cls)
        layout._init(shape, strides, itemsize)
        return layout

    def __repr__(self) -> str:
        return f"_StridedLayout(shape={self._shape}, strides={self._strides}, itemsize={self.itemsize})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _StridedLayout):
            return NotImplemented
        return (self.itemsize == other.itemsize and self.slice_offset == other.slice_offset
                and self._shape == other._shape and self._strides == other._strides)

    __hash__ = None  # type: ignore[assignment]  # mutable-looking value type, as cuda.core's (no __hash__)

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def strides(self) -> tuple[int, ...] | None:
        """Strides in elements; None: implicitly C-contiguous."""
        return self._strides

    @property
    def strides_in_bytes(self) -> tuple[int, ...] | None:
        """Strides in bytes; None where `strides` is None."""
        sib = self._sib
        if sib is _UNSET:
            strides = self._strides
            n = self.itemsize
            sib = self._sib = None if strides is None else tuple(s * n for s in strides)
        return sib  # type: ignore[no-any-return]

    @property
    def volume(self) -> int:
        """The number of elements."""
        v = self._volume
        if v is _UNSET:
            v = 1
            for n in self._shape:
                v *= n
            self._volume = v
        return v  # type: ignore[no-any-return]

    @property
    def stride_order(self) -> tuple[int, ...]:
        """The axes from the largest |stride| to the smallest (ties: larger extent first, then lower axis)."""
        order = self._order
        if order is _UNSET:
            strides, shape = self._strides, self._shape
            axes = range(len(shape))
            order = self._order = tuple(axes) if strides is None else tuple(
                sorted(axes, key=lambda i: (-abs(strides[i]), -shape[i], i)))
        return order  # type: ignore[no-any-return]

    @property
    def is_contiguous_c(self) -> bool:
        """True iff the layout is C-contiguous (axes of extent 1 aside)."""
        c = self._c
        if c is _UNSET:
            c = self._c = self._strides is None or self.volume == 0 or self._dense_in(reversed(range(self.ndim)))
        return c  # type: ignore[no-any-return]

    @property
    def is_contiguous_f(self) -> bool:
        """True iff the layout is F-contiguous (axes of extent 1 aside)."""
        f = self._f
        if f is _UNSET:
            if self.volume == 0:
                f = True
            elif self._strides is None:  # C-contiguous: F too only with at most one axis of extent > 1
                f = sum(1 for n in self._shape if n != 1) <= 1
            else:
                f = self._dense_in(range(self.ndim))
            self._f = f
        return f  # type: ignore[no-any-return]

    @property
    def is_contiguous_any(self) -> bool:
        """True iff some order of the axes makes the layout C-contiguous."""
        a = self._any
        if a is _UNSET:
            a = self._any = (self._strides is None or self.volume == 0
                             or self._dense_in(reversed(self.stride_order)))
        return a  # type: ignore[no-any-return]

    @property
    def is_dense(self) -> bool:
        """Contiguous in some order, with no slice offset."""
        return self.slice_offset == 0 and self.is_contiguous_any

    @property
    def is_unique(self) -> bool:
        """Whether each element maps to its own offset.  As cuda.core's check: the axes from the smallest |stride|
        must each step past the span of those below them, so unusual hand-made strides may read False."""
        strides, shape = self._strides, self._shape
        if strides is None or self.volume == 0:
            return True
        span = 0  # the largest offset the axes seen so far reach
        for axis in reversed(self.stride_order):
            n = shape[axis]
            if n != 1:
                s = abs(strides[axis])
                if span >= s:
                    return False
                span += s * (n - 1)
        return True

    @property
    def offset_bounds(self) -> tuple[int, int]:
        """(min_offset, max_offset) in elements; (0, -1) for an empty tensor."""
        if self.volume == 0:
            return 0, -1
        strides = self._strides
        if strides is None:
            return self.slice_offset, self.slice_offset + self.volume - 1
        lo = hi = self.slice_offset
        for s, n in zip(strides, self._shape):
            if s < 0:
                lo += s * (n - 1)
            else:
                hi += s * (n - 1)
        return lo, hi

    @property
    def min_offset(self) -> int:
        return self.offset_bounds[0]

    @property
    def max_offset(self) -> int:
        return self.offset_bounds[1]

    @property
    def slice_offset_in_bytes(self) -> int:
        return self.slice_offset * self.itemsize

    def required_size_in_bytes(self) -> int:
        """The bytes an allocation needs to hold every element: (max_offset + 1) * itemsize."""
        lo, hi = self.offset_bounds
        if lo < 0:
            raise ValueError(f"the layout maps elements to a negative offset ({lo}); no allocation from its start "
                             "holds them")
        return (hi + 1) * self.itemsize

    def _dense_in(self, axes: Any) -> bool:
        """Whether the strides grow densely along `axes` (from the fastest axis), skipping axes of extent 1."""
        strides, shape = self._strides, self._shape
        step = 1
        for axis in axes:
            n = shape[axis]
            if n != 1:
                if strides[axis] != step:  # type: ignore[index]
                    return False
                step *= n
        return True
