"""cuda.core's batched copies: `utils.copy_batch(stream, srcs, dsts, *, options=)`, `CopyOptions` and its two
enums, on ironaccel's `copy_batch` (one cuMemcpyBatchAsync; runs of equal options passed once).

As in cuda.core: the sequences pair by index and their Buffers must have equal sizes (ValueError); a single
Buffer instead of a sequence, `LEGACY_DEFAULT_STREAM` (which the driver refuses), a GraphBuilder or a capturing
stream are TypeErrors; options are one CopyOptions for every copy or one per copy.  Copies of one batch may
run concurrently and in any order: overlapping ranges are the caller's error, not checked.  An empty batch
does nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from .. import _ia
from .._utils.cuda_utils import from_ironaccel
from ..typing import StrEnum

__all__ = ["CopyOptions", "MemcpyOverlapMode", "MemcpySrcAccessOrder", "copy_batch"]


class MemcpySrcAccessOrder(StrEnum):
    """When the driver may read a copy's source (CUmemcpySrcAccessOrder)."""

    STREAM = "stream"
    DURING_API_CALL = "during_api_call"
    ANY = "any"


class MemcpyOverlapMode(StrEnum):
    """Whether a copy should overlap compute work (CUmemcpyFlags)."""

    DEFAULT = "default"
    PREFER_OVERLAP_WITH_COMPUTE = "prefer_overlap_with_compute"


_ACCESS = {MemcpySrcAccessOrder.STREAM: "stream", MemcpySrcAccessOrder.DURING_API_CALL: "during_call",
           MemcpySrcAccessOrder.ANY: "any"}


@dataclasses.dataclass(frozen=True)
class CopyOptions:
    """Attributes of one copy of a batch: source access order, location hints (Device, Host or None) and the
    overlap mode; strings become the enums at construction (ValueError for an unknown one)."""

    src_access_order: MemcpySrcAccessOrder | str = "stream"
    src_location_hint: Any = None
    dst_location_hint: Any = None
    overlap_mode: MemcpyOverlapMode | str = "default"

    def __post_init__(self) -> None:
        for name, enum in (("src_access_order", MemcpySrcAccessOrder), ("overlap_mode", MemcpyOverlapMode)):
            value = getattr(self, name)
            if not isinstance(value, enum):
                try:
                    object.__setattr__(self, name, enum(value))
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"invalid {name}: {value!r}") from exc

    def _attributes(self) -> Any:
        """ironaccel's CopyAttributes for these options."""
        return _ia.CopyAttributes(src_access=_ACCESS[MemcpySrcAccessOrder(self.src_access_order)],
                                  src_hint=_hint(self.src_location_hint, "src_location_hint"),
                                  dst_hint=_hint(self.dst_location_hint, "dst_location_hint"),
                                  prefer_overlap=self.overlap_mode == MemcpyOverlapMode.PREFER_OVERLAP_WITH_COMPUTE)


def _hint(where: Any, name: str) -> Any:
    from .._device import Device
    from .._host import Host

    if where is None:
        return None
    if isinstance(where, Device):
        return where.device_id
    if isinstance(where, Host):
        if where.is_numa_current:
            return "host_numa_current"
        return "host" if where.numa_id is None else ("host_numa", where.numa_id)
    raise TypeError(f"{name} must be a Device, a Host or None, got {type(where).__name__}")


_CAPTURING = ("copy_batch cannot be used on a capturing stream (the driver has no batched-copy node): use "
              "graph.GraphNode.memcpy or Buffer.copy_to per buffer")


def copy_batch(stream: Any, srcs: Sequence[Any], dsts: Sequence[Any], *, options: Any = None) -> None:
    """Copy srcs[i] into dsts[i] for every i on `stream`, in one driver call."""
    from .._stream import Stream_accept
    from ..graph._graph_builder import GraphBuilder
    from ._buffer import Buffer

    if isinstance(stream, GraphBuilder):
        raise TypeError("copy_batch cannot be captured into a graph (the driver has no batched-copy node): use "
                        "graph.GraphNode.memcpy or Buffer.copy_to per buffer")
    s = Stream_accept(stream, op="copy_batch")
    for what, seq in (("srcs", srcs), ("dsts", dsts)):
        if isinstance(seq, Buffer):
            raise TypeError(f"{what} must be a sequence of Buffers, not a single Buffer: for one copy use "
                            f"Buffer.copy_to / Buffer.copy_from")
        if not isinstance(seq, Sequence) or isinstance(seq, (str, bytes)):
            raise TypeError(f"{what} must be a sequence of Buffers, got {type(seq).__name__}")
    n = len(srcs)
    if len(dsts) != n:
        raise ValueError(f"srcs and dsts must have the same length (got {n} and {len(dsts)})")
    if int(s.handle) in (0, 1):
        raise TypeError("copy_batch does not accept LEGACY_DEFAULT_STREAM (cuMemcpyBatchAsync refuses it); use "
                        "PER_THREAD_DEFAULT_STREAM or a stream of your own")
    if not (_ia.all_instances(srcs, Buffer) and _ia.all_instances(dsts, Buffer)):
        _check_pairs(srcs, dsts, n)  # cuda.core's TypeError, naming the first pair that is not two Buffers
    if options is None:
        runs: Any = None  # ironaccel's default: stream-ordered, no hints
    elif isinstance(options, CopyOptions):
        runs = options._attributes()
    else:
        runs = [o._attributes() for o in _normalize_copy_options(options, n)]
    if n == 0:
        if s.is_capturing:
            raise TypeError(_CAPTURING)
        return
    try:
        _ia.copy_batch(dsts, srcs, stream=s, attributes=runs)  # its compiled call refuses a capturing stream
    except _ia.DriverError as exc:
        if exc.code is not None:
            raise from_ironaccel(exc) from None
        if isinstance(exc, _ia.InvalidState) and not isinstance(exc, _ia.ClosedError):
            raise TypeError(_CAPTURING) from None
        _check_pairs(srcs, dsts, n)  # cuda.core's error for what ironaccel refused (sizes, closed buffers)
        raise ValueError(f"copy_batch: {exc.detail or exc}") from None


def _check_pairs(srcs: Sequence[Any], dsts: Sequence[Any], n: int) -> None:
    """cuda.core's TypeError / ValueError for the first pair that is not two Buffers of one size."""
    from ._buffer import Buffer

    for i in range(n):
        src, dst = srcs[i], dsts[i]
        if not isinstance(src, Buffer) or not isinstance(dst, Buffer):
            bad = src if not isinstance(src, Buffer) else dst
            raise TypeError(f"copy {i}: expected Buffers, got {type(bad).__name__}")
        if src._size != dst._size:
            raise ValueError(f"copy {i}: buffer sizes mismatch between src and dst (sizes are: src={src._size}, "
                             f"dst={dst._size})")


def _normalize_copy_options(options: Any, n: int) -> tuple[CopyOptions, ...]:
    """One CopyOptions per copy: None and a single CopyOptions broadcast; a sequence must have length n."""
    if options is None:
        return (CopyOptions(),) * n
    if isinstance(options, CopyOptions):
        return (options,) * n
    if not isinstance(options, Sequence) or isinstance(options, (str, bytes)):
        raise TypeError(f"options must be a CopyOptions, a sequence of them or None, got {type(options).__name__}")
    if len(options) != n:
        raise ValueError(f"options must have one CopyOptions per copy ({n}), got {len(options)}")
    for i, o in enumerate(options):
        if not isinstance(o, CopyOptions):
            raise TypeError(f"options[{i}] must be a CopyOptions, got {type(o).__name__}")
    return tuple(options)
