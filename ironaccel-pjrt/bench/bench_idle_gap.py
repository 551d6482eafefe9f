"""Launch-and-wait latency of a small program against the idle time before the launch: ironaccel and JAX.

    python ironaccel-pjrt/bench/bench_idle_gap.py [--plugin NAME] [--n 1024] [--launches 1500]

The XLA CPU client (the xla_cpu_pjrt plugin, and jaxlib's own CPU client) runs a program of 1000 flops
or more on its worker pool.  A worker that found no work for a short while (~15 us on a 2-core VM)
sleeps, and the next launch then pays for waking it, and for waking the caller blocked on the result.
This prints the median execute+wait time after a busy-waited gap of 0..200 us for both sides, so that
the cliff can be seen to belong to the runtime, not to ironaccel.  ironaccel is shown blocking at once
(IRONACCEL_PJRT_SPIN_US=0) and polling first (the client's `spin`, default 200 us on CPU).
Not a test: prints a table.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_execute import pick_client

GAPS_US = (0, 5, 10, 20, 40, 80, 200)


def spin_for(us: float) -> None:
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def median_after_gap(op: Callable[[], None], gap_us: float, launches: int) -> float:
    times = []
    for _ in range(launches):
        spin_for(gap_us)
        start = time.perf_counter()
        op()
        times.append(time.perf_counter() - start)
    return float(np.median(times[launches // 8:])) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plugin", help="plugin name or path (default: the first usable one)")
    parser.add_argument("--n", type=int, default=1024, help="elements per array")
    parser.add_argument("--launches", type=int, default=1500, help="launches per gap and side")
    opts = parser.parse_args(argv)

    import jax

    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(opts.n).astype(np.float32) for _ in range(3))
    jitted = jax.jit(lambda x, y, z: x * y + z)
    client = pick_client(opts.plugin)
    exe = client.compile(jitted.lower(a, b, c).as_text())
    ia_args = [client.buffer_from_host(x) for x in (a, b, c)]
    jx_args = [jax.device_put(x) for x in (a, b, c)]
    default_spin = client.spin

    def ironaccel(spin: float) -> Callable[[], None]:
        def op() -> None:
            client.spin = spin
            (out,) = exe.execute(ia_args)
            out.block_until_ready()
            out.delete()
        return op

    def jax_op() -> None:
        jitted(*jx_args).block_until_ready()

    sides = [("ironaccel, blocking", ironaccel(0.0)), (f"ironaccel, polling {default_spin * 1e6:g} us",
                                                       ironaccel(default_spin)), (f"JAX {jax.__version__}", jax_op)]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"{client.plugin.name} (PJRT API {client.api.version_string}) against JAX on {jax.default_backend()}, "
          f"float32[{opts.n}] multiply-add, median execute+wait in us ({when})")
    print("| idle gap us | " + " | ".join(name for name, _ in sides) + " |")
    print("|---:|" + "---:|" * len(sides))
    for gap in GAPS_US:
        cells = [f"{median_after_gap(op, gap, opts.launches):.1f}" for _, op in sides]
        print(f"| {gap} | " + " | ".join(cells) + " |", flush=True)
    client.spin = default_spin
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
