"""A/B of the PyCUDA surface's small `memcpy_htod`: its page-locked ring against the driver's own staging.

    python3 ironaccel-cuda/bench/experiments/ab_htod.py [--sizes 1024,16384,65536] [--json OUT]

Two ways to queue a small copy on the legacy stream and return without waiting for the DMA:

- ``ring``: the compat's path, `_core.HtodRing.copy` (the bytes go into the next page-locked slot, the DMA is
  queued from there; a half's event is waited on before its slots are filled again);
- ``driver``: ``cuMemcpyHtoDAsync`` straight from the pageable source on the legacy stream
  (`_core.memcpy_htod`), the driver staging the bytes itself (documented as "might be synchronous"; whether it
  ever reads the source after returning is what a swap would also have to settle);
- ``compat``: the whole `memcpy_htod` call (the ring plus the Python around it), for reference.

Each batch ends with a synchronize of the legacy stream, timed, as the PyCUDA benchmark's row does.  Cases are
sampled together in balanced rounds (`harness.measure_rounds`); the ratio is driver time over ring time (above
1: the ring is faster).  An earlier probe (bench/experiments/README.md) measured the two
at about the same queueing cost; this settles whether the ring is worth keeping.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # paths.py lives in bench/

import paths  # noqa: E402

paths.ensure_import_paths()  # harness.py is in the repository's bench/

from harness import Case, SamplingConfig, measure_rounds  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,16384,65536")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import ironaccel_cuda_compat.pycuda.autoinit  # noqa: F401  (a context on device 0)
    import ironaccel_cuda_compat.pycuda.driver as drv
    from ironaccel_cuda import _core
    from ironaccel_cuda_compat.pycuda import _memory

    sizes = [int(x) for x in args.sizes.split(",")]
    dest = drv.mem_alloc(max(sizes))
    dp = int(dest)
    ring = _memory._staging(_memory._current("ab_htod")).ring
    report: dict[str, object] = {"rows": []}
    print("| size | ring ns | driver ns | compat ns | driver / ring [95% CI] |\n|---|---:|---:|---:|---:|")
    for n in sizes:
        src = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)

        def ring_run(k: int, src: np.ndarray = src, n: int = n) -> None:
            copy = ring.copy
            for _ in range(k):
                copy(dp, src, n)
            _core.stream_sync(0)

        def driver_run(k: int, src: np.ndarray = src, n: int = n) -> None:
            copy = _core.memcpy_htod
            for _ in range(k):
                copy(dp, src, n, 0)
            _core.stream_sync(0)

        def compat_run(k: int, src: np.ndarray = src) -> None:
            copy = drv.memcpy_htod
            for _ in range(k):
                copy(dest, src)
            _core.stream_sync(0)

        cases = [(label, Case(run)) for label, run in (("ring", ring_run), ("driver", driver_run),
                                                        ("compat", compat_run))]
        for _, case in cases:  # each must deliver the bytes
            drv.memset_d8(dest, 0, n)
            case.run(1)
            if not np.array_equal(drv.from_device(dest, (n,), np.uint8), src):
                raise SystemExit(f"a {n}-byte copy did not land")
        samples = measure_rounds(cases, SamplingConfig())
        ratio = samples.ratio(["driver"], ["ring"])
        row = {"nbytes": n, **{label: samples.median_ns(label) for label, _ in cases}, "driver_over_ring":
               ratio.to_json()}
        report["rows"].append(row)  # type: ignore[attr-defined]
        print(f"| {n} | {row['ring']:,.0f} | {row['driver']:,.0f} | {row['compat']:,.0f} | "
              f"{ratio.median:.3f} [{ratio.low:.3f}, {ratio.high:.3f}] |")
    report["driver_reuse_check"] = reuse_check(drv, dest, _core)
    print(f"driver path, source overwritten after each call behind a busy GPU: {report['driver_reuse_check']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


SPIN = r'''extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64(); while (clock64() - t0 < cycles) {} }'''


def reuse_check(drv: object, dest: object, _core: object) -> str:
    """Whether `cuMemcpyHtoDAsync` from pageable memory has taken the bytes when it returns, even while the
    legacy stream is busy (a ~5 ms spin kernel queued ahead, so no DMA can run yet): 256 copies of 1 KiB,
    the source overwritten after each; the device must hold every copy's own bytes."""
    from ironaccel_cuda_compat.pycuda.compiler import SourceModule

    fn = SourceModule(SPIN, no_extern_c=True).get_function("spin")
    n, k = 1024, 256
    big = drv.mem_alloc(n * k)  # type: ignore[attr-defined]
    src = np.zeros(n, np.uint8)
    fn(np.int64(10_000_000), block=(1, 1, 1), grid=(1, 1))  # PyCUDA's stream=None: the legacy stream
    for i in range(k):
        src[:] = i
        _core.memcpy_htod(int(big) + i * n, src, n, 0)  # type: ignore[attr-defined]
        src[:] = 255 - i  # overwritten at once
    _core.stream_sync(0)  # type: ignore[attr-defined]
    got = drv.from_device(big, (k, n), np.uint8)  # type: ignore[attr-defined]
    bad = [i for i in range(k) if not (got[i] == i).all()]
    return "every copy held its own bytes" if not bad else f"{len(bad)} of {k} copies read the overwritten source"


if __name__ == "__main__":
    main()
