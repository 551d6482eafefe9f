"""The sides of the benchmark, in column order: ironaccel first, then each peer, the C floor last.

Each module imports its library only inside `open()`, so a missing peer costs nothing but its column.
"""

from __future__ import annotations

from sides.base import Side


def all_sides() -> list[Side]:
    from sides.bindings_side import BindingsSide
    from sides.cudacore_side import CudaCoreSide
    from sides.cupy_side import CupySide
    from sides.floor_side import FloorSide
    from sides.ironaccel_side import IronaccelSide
    from sides.torch_side import TorchSide

    return [IronaccelSide(), BindingsSide(), CudaCoreSide(), CupySide(), TorchSide(), FloorSide()]


SIDE_NAMES = ("ironaccel", "cuda.bindings", "cuda.core", "cupy", "torch", "floor")
BASELINE = "ironaccel"
