"""Batched copies: many copies in one driver call (cuMemcpyBatchAsync).

A serving runtime swapping a hundred KV-cache blocks between device and page-locked host memory, or a loader
scattering many small tensors, makes one call instead of a hundred:

    cu.copy_batch(dsts, srcs, stream=s)                  # DeviceBufs / PinnedBufs, sizes from the buffers
    cu.copy_batch(dst_addrs, src_addrs, sizes, stream=s) # addresses: ints, or uint64 numpy arrays (no loop)

Any memory the driver can address may be an operand (device, page-locked or managed memory).  The driver may
run the copies of one batch concurrently and in any order: no copy's destination may overlap another copy's
source or destination (not checked: the driver's contract, as with cuda.core's `copy_batch`).  `attributes`
(one `CopyAttributes`, or one per copy) say when the driver may read the sources and where managed operands
are likely to be; runs of equal attributes are handed to the driver once.

Needs a CUDA 13.0 driver (before it, Unsupported naming cuMemcpyBatchAsync); the legacy default stream is
refused (the driver rejects it), and so is a capturing stream: the driver has no graph node for a batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _core
from .errors import closed, invalid

__all__ = ["CopyAttributes", "copy_batch"]

OP = "cuMemcpyBatchAsync"
_ORDERS = {"stream": 1, "during_call": 2, "any": 3}  # CUmemcpySrcAccessOrder
_LOCATION_NONE, _LOCATION_DEVICE, _LOCATION_HOST, _LOCATION_HOST_NUMA, _LOCATION_HOST_NUMA_CURRENT = range(5)
# (CUmemLocationType)
_CU_STREAM_LEGACY = 1
# CUmemcpyAttributes: srcAccessOrder, srcLocHint {type, id}, dstLocHint {type, id}, flags (24 bytes).
_ATTRS = np.dtype([("order", "<i4"), ("src_type", "<i4"), ("src_id", "<i4"), ("dst_type", "<i4"),
                   ("dst_id", "<i4"), ("flags", "<u4")])


@dataclass(frozen=True)
class CopyAttributes:
    """How the driver may treat the copies of a batch (CUmemcpyAttributes).

    - src_access: "stream" (sources read in stream order, the default), "during_call" (read before
      `copy_batch` returns, so the caller may reuse them at once; no earlier work on the stream may still
      be using them), or "any" (read at any time until the copies finish in stream order).
    - src_hint, dst_hint: where a managed or pageable operand should be taken from or put: None, "host",
      "host_numa_current", ("host_numa", node), a Device or a device ordinal.  The driver ignores them for
      other memory.
    - prefer_overlap: ask the driver to overlap the copies with compute work (a hint).
    """

    src_access: str = "stream"
    src_hint: Any = None
    dst_hint: Any = None
    prefer_overlap: bool = False

    #: The CUmemcpyAttributes fields, worked out once at construction (which checks every field).
    _record: tuple[int, int, int, int, int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.src_access, str) or self.src_access not in _ORDERS:
            raise invalid(OP, f"src_access must be one of {', '.join(map(repr, _ORDERS))}, got {self.src_access!r}")
        st, sid = _location(self.src_hint, "src_hint")
        dt, did = _location(self.dst_hint, "dst_hint")
        if not isinstance(self.prefer_overlap, bool):
            raise invalid(OP, f"prefer_overlap must be a bool, got {type(self.prefer_overlap).__name__}")
        object.__setattr__(self, "_record", (_ORDERS[self.src_access], st, sid, dt, did, int(self.prefer_overlap)))


def _location(hint: Any, what: str) -> tuple[int, int]:
    """(CUmemLocationType, id) of a location hint."""
    if hint is None:
        return _LOCATION_NONE, 0
    if isinstance(hint, str):  # compared only as a str: `==` on an array is elementwise (ambiguous truth)
        if hint == "host":
            return _LOCATION_HOST, 0
        if hint == "host_numa_current":
            return _LOCATION_HOST_NUMA_CURRENT, 0
    elif isinstance(hint, tuple) and len(hint) == 2 and isinstance(hint[0], str) and hint[0] == "host_numa":
        node = hint[1]
        if isinstance(node, int) and not isinstance(node, bool) and 0 <= node < 1 << 31:
            return _LOCATION_HOST_NUMA, node
    ordinal = getattr(hint, "ordinal", hint)
    if isinstance(ordinal, (int, np.integer)) and not isinstance(ordinal, bool) and 0 <= ordinal < 1 << 31:
        return _LOCATION_DEVICE, int(ordinal)
    raise invalid(OP, f"{what} must be None, 'host', 'host_numa_current', ('host_numa', node), a Device or a "
                  f"device ordinal, got {hint!r}")


_DEFAULT = CopyAttributes()
_FIRST = np.zeros(1, np.uint64)
_FIRST.flags.writeable = False
_DEFAULT_ARRAYS = (np.array([_DEFAULT._record], _ATTRS), _FIRST)  # never written: the driver only reads them
_DEFAULT_ARRAYS[0].flags.writeable = False


def copy_batch(dsts: Any, srcs: Any, sizes: Any = None, *, stream: Any,
               attributes: CopyAttributes | Sequence[CopyAttributes] | None = None) -> None:
    """Queue `len(dsts)` copies, dsts[i] <- srcs[i], on `stream` in one driver call.

    - dsts, srcs: sequences of ironaccel buffers (DeviceBuf, PinnedBuf: anything with `ptr` and `nbytes`; the
      cuda.core compat's Buffers) or of addresses (ints), or uint64 numpy arrays of addresses.
    - sizes: bytes per copy: None (each pair's buffers, which must be of one size), one int for every copy, or
      one per copy (a sequence or an integer numpy array); each at most both operands' `nbytes` where known.
    - stream: the ironaccel Stream the copies are ordered on (not the legacy default stream).
    - attributes: one CopyAttributes for every copy (default: stream-ordered, no hints), or one per copy.

    An empty batch does nothing.  Returns once the copies are queued (after the sources are read, for
    "during_call").
    """
    stream_h = _stream_handle(stream)
    d, dn = _operands(dsts, "dsts")
    s, sn = _operands(srcs, "srcs")
    n = len(d)
    if len(s) != n:
        raise invalid(OP, f"dsts has {n} entries and srcs {len(s)}: they must pair up")
    z = _sizes(sizes, n, dn, sn)
    attrs, starts = _attributes(attributes, n)
    if n == 0:
        return
    _core.memcpy_batch(d, s, z, attrs, starts, stream_h)


def _stream_handle(stream: Any) -> int:
    """The stream's handle (its context is made current by the compiled call if it is not)."""
    if not isinstance(stream, _core.StreamCore):
        raise invalid(OP, f"stream must be an ironaccel Stream, got {type(stream).__name__}")
    h = stream._h
    if h is _core.CLOSED:
        raise closed(OP, "stream")
    h = int(h)
    if h in (0, _CU_STREAM_LEGACY):
        raise invalid(OP, "the legacy default stream cannot order a batched copy (the driver refuses it): use a "
                      "stream of your own, the device's default stream or the per-thread default stream")
    return h


def _operands(items: Any, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(uint64 addresses, their buffers' byte sizes or None when only addresses were given)."""
    if isinstance(items, np.ndarray):
        if items.ndim != 1 or items.dtype.kind not in "ui":
            raise invalid(OP, f"{what} as a numpy array must be 1-D of integer addresses, got {items.dtype} "
                          f"of shape {items.shape}")
        if items.dtype.kind == "i" and items.size and int(items.min()) < 0:
            raise invalid(OP, f"{what} holds a negative address")
        return np.ascontiguousarray(items, np.uint64), None
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise invalid(OP, f"{what} must be a sequence of buffers or addresses, got {type(items).__name__}")
    n = len(items)
    addrs = np.empty(n, np.uint64)
    nbytes = np.empty(n, np.uint64)
    known = _core.batch_operands(items, addrs, nbytes, what)
    return addrs, (nbytes if known and n else None)


def _sizes(sizes: Any, n: int, dn: np.ndarray | None, sn: np.ndarray | None) -> np.ndarray:
    if sizes is None:
        if dn is None or sn is None:
            if n == 0:
                return np.empty(0, np.uint64)
            raise invalid(OP, "sizes is needed when dsts or srcs are addresses")
        bad = np.flatnonzero(dn != sn)
        if bad.size:
            i = int(bad[0])
            raise invalid(OP, f"copy {i}: the destination has {int(dn[i])} bytes and the source {int(sn[i])}: pass "
                          f"sizes to copy part of a buffer")
        return dn
    if isinstance(sizes, (int, np.integer)) and not isinstance(sizes, bool):
        if not 0 <= sizes < 1 << 64:
            raise invalid(OP, f"sizes must not be negative, got {sizes}")
        z = np.empty(n, np.uint64)
        z.fill(sizes)
    else:
        try:
            z = np.asarray(sizes)
        except (TypeError, ValueError) as exc:
            raise invalid(OP, f"sizes must be an int or one integer per copy: {exc}") from None
        if z.ndim != 1 or len(z) != n or (z.size and z.dtype.kind not in "ui"):
            raise invalid(OP, f"sizes must be an int or {n} integers, got {z.dtype} of shape {z.shape}")
        if z.dtype.kind == "i" and z.size and int(z.min()) < 0:
            raise invalid(OP, "sizes must not be negative")
        z = np.ascontiguousarray(z, np.uint64)
    for known, what in ((dn, "destination"), (sn, "source")):
        if known is not None:
            over = np.flatnonzero(z > known)
            if over.size:
                i = int(over[0])
                raise invalid(OP, f"copy {i}: {int(z[i])} bytes is more than the {what}'s {int(known[i])}")
    return z


def _attributes(attributes: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The CUmemcpyAttributes array and the first copy of each run of equal attributes."""
    if attributes is None:
        return _DEFAULT_ARRAYS
    if isinstance(attributes, CopyAttributes):
        return np.array([attributes._record], _ATTRS), _FIRST
    if not isinstance(attributes, Sequence) or isinstance(attributes, (str, bytes)):
        raise invalid(OP, f"attributes must be a CopyAttributes or one per copy, got {type(attributes).__name__}")
    if len(attributes) != n:
        raise invalid(OP, f"attributes has {len(attributes)} entries for {n} copies")
    records: list[tuple[int, ...]] = []
    starts: list[int] = []
    prev = None
    for i, a in enumerate(attributes):
        if not isinstance(a, CopyAttributes):
            raise invalid(OP, f"attributes[{i}] must be a CopyAttributes, got {type(a).__name__}")
        if a != prev:
            records.append(a._record)
            starts.append(i)
            prev = a
    if not records:
        records, starts = [_DEFAULT._record], [0]
    return np.array(records, _ATTRS), np.array(starts, np.uint64)
