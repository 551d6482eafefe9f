"""ironaccel's CPU round trip alone, no JAX in the process: the figure to compare ironaccel's versions by.

    python ironaccel-pjrt/bench/bench_round_trip_alone.py [--plugin NAME] [--batches 50]

The round trip of bench_execute.py (three float32[1024] uploads, ``a * b + c``, the result to a new numpy
array, the buffers dropped), 50 calls a batch: prints the median, 25th and 75th percentile of the batches'
us per call, then the median of each phase over single timed calls (uploads, execute, wait, to_host after
the wait, drop).  The phases' timers and separate wait lengthen the gaps the XLA CPU pool sees, so their sum
exceeds the batch figure: compare phases between ironaccel versions, not with the round trip.  JAX's own
round trip on this 2-core VM moves between ~30 and ~90 us from one run to the next (its pool's wake-ups),
so ratios against it are compared within a run; this figure is ironaccel's only.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from ironaccel_pjrt.client import Client
from ironaccel_pjrt.discovery import discover

PROGRAM = """
func.func public @main(%a: tensor<1024xf32>, %b: tensor<1024xf32>, %c: tensor<1024xf32>) -> tensor<1024xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<1024xf32>
  %1 = stablehlo.add %0, %c : tensor<1024xf32>
  return %1 : tensor<1024xf32>
}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plugin", help="plugin name or path (default: the first CPU plugin)")
    parser.add_argument("--batches", type=int, default=50)
    opts = parser.parse_args(argv)
    plugins = [p for p in discover() if (opts.plugin in (p.name, p.path) if opts.plugin else "cpu" in p.name)]
    if not plugins:
        sys.exit("no CPU PJRT plugin discovered (pip install xla-cpu-pjrt)")
    client = Client.create(plugins[0])
    device = client.devices[0]
    exe = client.compile(PROGRAM)
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(1024).astype(np.float32) for _ in range(3))
    expected = a.astype(np.float64) * b + c

    def round_trip() -> np.ndarray:
        bufs = [client.buffer_from_host(x, device) for x in (a, b, c)]
        (out,) = exe.execute(bufs)
        return out.to_host()

    np.testing.assert_allclose(round_trip(), expected, rtol=1e-6, atol=1e-6)
    clock = time.perf_counter_ns
    per_call = []
    for batch in range(opts.batches + 10):
        start = clock()
        for _ in range(50):
            round_trip()
        if batch >= 10:  # the first ten warm up
            per_call.append((clock() - start) / 50 / 1e3)
    q25, q50, q75 = np.percentile(per_call, [25, 50, 75])
    print(f"round trip: median {q50:.2f} us (p25 {q25:.2f}, p75 {q75:.2f}), {opts.batches} batches of 50, "
          f"plugin {client.plugin.name}, spin {client.spin * 1e6:.0f} us")

    phases = np.zeros((3000, 6), np.int64)
    for i in range(len(phases)):
        t0 = clock()
        bufs = [client.buffer_from_host(x, device) for x in (a, b, c)]
        t1 = clock()
        (out,) = exe.execute(bufs)
        t2 = clock()
        out.block_until_ready()
        t3 = clock()
        out.to_host()
        t4 = clock()
        del bufs, out
        phases[i] = (t0, t1, t2, t3, t4, clock())
    medians = np.median(np.diff(phases, axis=1), axis=0) / 1e3
    names = ("3 uploads", "execute", "wait", "to_host", "drop")
    print("phases (median us): " + ", ".join(f"{n} {m:.2f}" for n, m in zip(names, medians)))
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
