"""The cases of the webgpu and opengl dispatch benches: y = a * x + b on float32, through ironaccel's
ComputeDevice (the same calls on either backend, so one code here) against the peer's direct use (each
bench's own `Peer`).

  round_trip  upload x, allocate y, dispatch, download y, free both (fresh buffers each time)
  repeated    the same buffers and pipeline each time, params written each time: dispatch + download
  burst50     50 dispatches with changing params on the same small buffers, then one download

on 4 KiB and 64 MiB of x.  Targets (ironaccel / direct): round trip within 1.15x, repeated no slower.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from harness import Case
from versus import compare, repeat

SMALL, LARGE = 1024, 16 << 20  # float32 elements: 4 KiB and 64 MiB
F = np.float32
# The direct sides' uniform: scale and offset (float32), n (uint32), 4 bytes of padding.  struct.pack is the
# fastest idiomatic way to make those 16 bytes in Python; np.array + a uint32 view + an item set, used before,
# cost those sides ~0.6 us a dispatch more (2-core machine).
pack_params = struct.Struct("<ffII").pack
ROUND_TRIP_TARGET, REPEATED_TARGET = 1.15, 1.0


def grid(n: int) -> tuple[int, int]:
    """Workgroups of 64 for n elements, as rows of at most 4096 (the kernel continues the index per row)."""
    groups = (n + 63) // 64
    return (groups, 1) if groups <= 4096 else (4096, (groups + 4095) // 4096)


def scale(k: int) -> float:
    """The `a` of the k-th dispatch of a burst: it changes every dispatch, and is 1 for the last one of 1 or 50
    dispatches, so the check's y = x + 1 proves x was read."""
    return float(1 + k % 7)


class Peer(Protocol):
    """One side of the cases: its `round_trip(x)` (a = 2, b = 1) and its persistent buffers for x."""

    def round_trip(self, x: np.ndarray) -> np.ndarray: ...

    def persistent(self, x: np.ndarray) -> tuple[Callable[[int], np.ndarray], Callable[[], None]]:
        """Buffers made once for x: `run(dispatches)` (a = scale(k), b = 1, then download y) and `close()`."""
        ...


class ComputeSide:
    """ironaccel's side, on any ComputeDevice whose pipeline takes the scale_offset kernel in `source`.

    Its params are the Python floats and int the direct sides start from too (ironaccel packs a float as
    float32 and an int below 2**31 as int32: n's bits as the kernel's u32 reads them); building np.float32 /
    np.uint32 scalars first cost this side about 0.5 us a dispatch that the direct sides do not pay.
    """

    def __init__(self, dev: Any, source: str):
        self.dev = dev
        self.pipe = dev.pipeline(source, buffers=2, params=3)

    def round_trip(self, x: np.ndarray) -> np.ndarray:
        xs, ys = self.dev.upload(x), self.dev.alloc(x.size)
        self.dev.dispatch(self.pipe, [xs, ys], grid(x.size), (2.0, 1.0, x.size))
        y = self.dev.download(ys)
        xs.close()
        ys.close()
        return y

    def persistent(self, x: np.ndarray) -> tuple[Callable[[int], np.ndarray], Callable[[], None]]:
        n, dev = x.size, self.dev
        xs, ys, out = dev.upload(x), dev.alloc(n), np.empty(n, F)

        def run(dispatches: int) -> np.ndarray:
            for k in range(dispatches):
                dev.dispatch(self.pipe, [xs, ys], grid(n), (scale(k), 1.0, n))
            return dev.download(ys, out)

        def close() -> None:
            xs.close()
            ys.close()

        return run, close


def round_trip_case(side: Peer, x: np.ndarray) -> Case:
    want = F(2) * x + F(1)
    return Case(run=repeat(lambda: side.round_trip(x)),
                check=lambda: np.testing.assert_allclose(side.round_trip(x), want, rtol=1e-6))


def repeated_case(side: Peer, x: np.ndarray, dispatches: int) -> Case:
    run, close = side.persistent(x)
    want = F(scale(dispatches - 1)) * x + F(1)
    return Case(run=repeat(lambda: run(dispatches)), close=close,
                check=lambda: np.testing.assert_allclose(run(dispatches), want, rtol=1e-6))


def run_cases(ours: Peer, direct: Peer, pairs: int) -> list[dict[str, Any]]:
    """Every case, `pairs` rounds each on 4 KiB (a fifth of that, at least 5, on 64 MiB); the report's rows."""
    rng = np.random.default_rng(0)
    small = rng.standard_normal(SMALL).astype(F)
    large = rng.standard_normal(LARGE).astype(F)
    few = max(5, pairs // 5)
    plan: list[tuple[str, Callable[[Peer], Case], int, float]] = [
        ("round_trip_4KiB", lambda s: round_trip_case(s, small), pairs, ROUND_TRIP_TARGET),
        ("repeated_4KiB", lambda s: repeated_case(s, small, 1), pairs, REPEATED_TARGET),
        ("burst50_4KiB", lambda s: repeated_case(s, small, 50), pairs, REPEATED_TARGET),
        ("round_trip_64MiB", lambda s: round_trip_case(s, large), few, ROUND_TRIP_TARGET),
        ("repeated_64MiB", lambda s: repeated_case(s, large, 1), few, REPEATED_TARGET),
    ]
    return [compare(name, make(ours), make(direct), rounds=rounds, target=target)
            for name, make, rounds, target in plan]
