"""Execute round trip of a small StableHLO program: ironaccel-pjrt against JAX's own dispatch.

    python ironaccel-pjrt/bench/bench_execute.py [--plugin NAME] [--n 1024] [--pairs 200] [--json PATH]

The program is y = a * b + c on float32[n].  Both sides run the same
StableHLO: JAX's lowering of ``jax.jit(lambda a, b, c: a * b + c)`` is fed to
ironaccel as text (falling back to an equivalent hand-written module if the
plugin's StableHLO is older than JAX's).  Three operations are timed:

* ``execute``    inputs already on the device; launch, wait for the output, free it;
* ``round_trip`` three host arrays in, launch, the result back to a numpy array;
* ``round_trip_copies`` the same, with JAX made to copy as ironaccel does (numpy
  copies in, ``np.array`` out): on a CPU device JAX aliases host memory both ways
  (``device_put`` and ``np.asarray`` are zero-copy), ironaccel copies;
* ``dispatch``   launch only (no wait); the outputs are waited for after each
  batch, untimed, so one side's queued work never runs into the other's batch.

On the CPU plugin the round trip is bound by the XLA CPU runtime, not by the
copies (4 KiB each, under 1 us): a program of 1000 flops or more runs on the
client's worker pool, whose workers sleep after ~15 us without work, and the
launch after that costs 60-100 us of thread wake-ups on a 2-core VM -- JAX's CPU
client the same (bench_idle_gap.py shows both).  ironaccel's three uploads
(~3 us each) still take longer than that window, JAX's one C++ call does not;
ironaccel's CPU client polls a buffer's event before it blocks
(IRONACCEL_PJRT_SPIN_US), which saves one of the two wake-ups.  See README.md here.

Each side's result is checked once against numpy, then both are sampled
together in rounds (bench/harness.py: batches of ~2 ms, the order alternating);
each operation reports ironaccel / JAX time with its bootstrap 95% interval
against the target, parity (<= 1.0; bench/versus.py).  JAX dispatches on its
default backend: on a GPU machine that is the same CUDA plugin ironaccel
loads; on a CPU machine it is jaxlib's built-in CPU client (the same XLA CPU
runtime, not the plugin file).  Not a test: prints a table and, with
``--json PATH``, writes the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # two clients share one GPU here

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from harness import Case
from versus import compare, publish, repeat, report

from ironaccel_pjrt.client import Client
from ironaccel_pjrt.discovery import discover

TARGET = 1.0  # parity: no slower than JAX

HAND_WRITTEN = """
func.func public @main(%a: tensor<{n}xf32>, %b: tensor<{n}xf32>, %c: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %0 = stablehlo.multiply %a, %b : tensor<{n}xf32>
  %1 = stablehlo.add %0, %c : tensor<{n}xf32>
  return %1 : tensor<{n}xf32>
}}
"""


def pick_client(name: str | None) -> Client:
    reasons = []
    for plugin in discover():
        if name and name not in (plugin.name, plugin.path):
            continue
        try:
            return Client.create(plugin)
        except Exception as exc:
            reasons.append(f"{plugin.name}: {exc}")
    sys.exit("no usable PJRT plugin: " + "; ".join(reasons or ["none discovered"]))


def case(op: Callable[[], object], result: Callable[[], np.ndarray], expected: np.ndarray,
         settle: Callable[[], None] | None = None) -> Case:
    """`op` timed in batches (`settle` after each, untimed); `result()` checked once against `expected`."""
    return Case(run=repeat(op), settle=settle,
                check=lambda: np.testing.assert_allclose(result(), expected, rtol=1e-6, atol=1e-6))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plugin", help="plugin name or path (default: the first usable one)")
    parser.add_argument("--n", type=int, default=1024, help="elements per array")
    parser.add_argument("--pairs", type=int, default=200, help="rounds per operation")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--no-baseline", action="store_true", help="do not overwrite bench/BASELINE.md")
    opts = parser.parse_args(argv)

    import jax

    n = opts.n
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    expected = a.astype(np.float64) * b + c

    jitted = jax.jit(lambda x, y, z: x * y + z)
    jax_text = jitted.lower(a, b, c).as_text()
    jax_device = jax.devices()[0]

    client = pick_client(opts.plugin)
    device = client.devices[0]
    try:
        exe, program = client.compile(jax_text), "jax lowering"
    except Exception as exc:
        print(f"(plugin rejects JAX's StableHLO: {str(exc).splitlines()[0][:120]}; using the hand-written module)")
        exe, program = client.compile(HAND_WRITTEN.format(n=n)), "hand-written"

    ia_args = [client.buffer_from_host(x, device) for x in (a, b, c)]
    jx_args = [jax.device_put(x, jax_device) for x in (a, b, c)]

    def ia_execute() -> None:
        (out,) = exe.execute(ia_args)
        out.block_until_ready()
        out.delete()

    def ia_result() -> np.ndarray:
        return exe.execute(ia_args)[0].to_host()

    def jx_execute() -> None:
        jitted(*jx_args).block_until_ready()

    def jx_result() -> np.ndarray:
        return np.asarray(jitted(*jx_args))

    def ia_round_trip() -> np.ndarray:
        bufs = [client.buffer_from_host(x, device) for x in (a, b, c)]
        (out,) = exe.execute(bufs)
        return out.to_host()

    def jx_round_trip() -> np.ndarray:
        return np.asarray(jitted(a, b, c))

    def jx_round_trip_copies() -> np.ndarray:
        return np.array(jitted(a.copy(), b.copy(), c.copy()))

    ia_pending: list[object] = []
    jx_pending: list[object] = []

    def ia_dispatch() -> None:
        ia_pending.append(exe.execute(ia_args)[0])

    def jx_dispatch() -> None:
        jx_pending.append(jitted(*jx_args))

    def drain(pending: list[object]) -> Callable[[], None]:
        def settle() -> None:
            for out in pending:
                out.block_until_ready()  # type: ignore[attr-defined]
            pending.clear()

        return settle

    cases = [
        compare("execute", case(ia_execute, ia_result, expected), case(jx_execute, jx_result, expected),
                rounds=opts.pairs, target=TARGET),
        compare("round_trip", case(ia_round_trip, ia_round_trip, expected),
                case(jx_round_trip, jx_round_trip, expected), rounds=opts.pairs, target=TARGET),
        compare("round_trip_copies", case(ia_round_trip, ia_round_trip, expected),
                case(jx_round_trip_copies, jx_round_trip_copies, expected), rounds=opts.pairs, target=TARGET),
        # the dispatch's check is the execute's: the same executable on the same arguments
        compare("dispatch", case(ia_dispatch, ia_result, expected, drain(ia_pending)),
                case(jx_dispatch, jx_result, expected, drain(jx_pending)), rounds=opts.pairs, target=TARGET),
    ]
    facts = {
        "plugin": client.plugin.name,
        "plugin_api": client.api.version_string,
        "platform": client.platform_name,
        "jax_backend": jax.default_backend(),
        "jax_device": str(jax_device),
        "program": program,
        "n": n,
        "ironaccel_spin_us": round(client.spin * 1e6, 1),
        "jax_cpu_round_trip": ("zero-copy in and out (round_trip_copies: JAX copies too)"
                               if jax.default_backend() == "cpu" else "copies"),
    }
    publish(report("pjrt", device.kind, f"JAX {jax.__version__}", facts, cases), opts.json,
            baseline=None if opts.no_baseline else Path(__file__).with_name("BASELINE.md"))
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
