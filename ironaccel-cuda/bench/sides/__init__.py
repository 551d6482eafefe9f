"""The sides of the benchmark, in column order: ironaccel first, then each peer, the C floor last.

Each module imports its library only inside `open()`, so a missing peer costs nothing but its column.
"""

from __future__ import annotations

from pathlib import Path

from sides.base import BenchContext, HostData, Side


def all_sides() -> list[Side]:
    from sides.bindings_side import BindingsSide
    from sides.cudacore_side import CudaCoreSide
    from sides.cupy_side import CupySide
    from sides.floor_side import FloorSide
    from sides.ironaccel_side import IronaccelSide
    from sides.torch_side import TorchSide

    return [IronaccelSide(), BindingsSide(), CudaCoreSide(), CupySide(), TorchSide(), FloorSide()]


def open_context(device: int, workdir: Path, host_bytes: int, shared_host: bool = True
                 ) -> tuple[BenchContext, dict[str, object]]:
    """The context every side opens with: the device's facts, the benchmark CUBIN written into `workdir`, host data of
    `host_bytes`; ironaccel's NVRTC cache pointed into `workdir` first.  SideUnavailable when there is no device."""
    from sides.bindings_side import benchmark_cubin, device_facts
    from sides.ironaccel_side import prepare_environment

    prepare_environment(workdir)
    facts = device_facts(device)
    cubin = benchmark_cubin(str(facts["arch"]))
    cubin_path = workdir / "bench_kernels.cubin"
    cubin_path.write_bytes(cubin)
    host = HostData(host_bytes, shared=shared_host)
    return BenchContext(device, str(facts["arch"]), cubin, cubin_path, host, workdir), facts


SIDE_NAMES = ("ironaccel", "cuda.bindings", "cuda.core", "cupy", "torch", "floor")
BASELINE = "ironaccel"
