"""Execute round trip of a small StableHLO program: ironaccel-pjrt against JAX's own dispatch.

    python ironaccel-pjrt/bench/bench_execute.py [--plugin NAME] [--n 1024] [--pairs 200] [--batch 50]

The program is y = a * b + c on float32[n].  Both sides run the same
StableHLO: JAX's lowering of ``jax.jit(lambda a, b, c: a * b + c)`` is fed to
ironaccel as text (falling back to an equivalent hand-written module if the
plugin's StableHLO is older than JAX's).  Three operations are timed:

* ``execute``    inputs already on the device; launch, wait for the output, free it;
* ``round_trip`` three host arrays in, launch, the result back to a numpy array;
* ``dispatch``   launch only (no wait), then one wait at the end of the batch.

Each pair times one batch of ironaccel then one batch of JAX, back to back,
so drift hits both; the figure is the median over pairs of the per-pair
ratio ironaccel / JAX (below 1: ironaccel is faster).  JAX dispatches on its
default backend: on a GPU machine that is the same CUDA plugin ironaccel
loads; on a CPU machine it is jaxlib's built-in CPU client (the same XLA CPU
runtime, not the plugin file).  Not a test: prints a table and, with
``--json PATH``, writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # two clients share one GPU here

import numpy as np

from ironaccel_pjrt.client import Client
from ironaccel_pjrt.discovery import discover

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


def timed(fn: Callable[[], object], batch: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(batch):
        fn()
    return (time.perf_counter_ns() - start) / batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plugin", help="plugin name or path (default: the first usable one)")
    parser.add_argument("--n", type=int, default=1024, help="elements per array")
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--batch", type=int, default=50, help="operations per timed batch")
    parser.add_argument("--json", help="write the figures here")
    opts = parser.parse_args()

    import jax
    import jax.numpy as jnp

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
    np.testing.assert_allclose(exe.execute(ia_args)[0].to_host(), expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(jitted(*jx_args)), expected, rtol=1e-6, atol=1e-6)

    def ia_execute() -> None:
        (out,) = exe.execute(ia_args)
        out.block_until_ready()
        out.delete()

    def jx_execute() -> None:
        jitted(*jx_args).block_until_ready()

    def ia_round_trip() -> None:
        bufs = [client.buffer_from_host(x, device) for x in (a, b, c)]
        (out,) = exe.execute(bufs)
        out.to_host()

    def jx_round_trip() -> None:
        np.asarray(jitted(a, b, c))

    ia_pending: list[object] = []
    jx_pending: list[object] = []

    def ia_dispatch() -> None:
        ia_pending.append(exe.execute(ia_args)[0])

    def jx_dispatch() -> None:
        jx_pending.append(jitted(*jx_args))

    def drain() -> None:
        for out in ia_pending:
            out.block_until_ready()  # type: ignore[attr-defined]
        for arr in jx_pending:
            arr.block_until_ready()  # type: ignore[attr-defined]
        ia_pending.clear()
        jx_pending.clear()

    results = {}
    for label, ia_fn, jx_fn in (("execute", ia_execute, jx_execute), ("round_trip", ia_round_trip, jx_round_trip),
                                ("dispatch", ia_dispatch, jx_dispatch)):
        for _ in range(3):  # warm-up
            timed(ia_fn, opts.batch)
            timed(jx_fn, opts.batch)
            drain()
        ia_times, jx_times, ratios = [], [], []
        for _ in range(opts.pairs):
            t_ia = timed(ia_fn, opts.batch)
            t_jx = timed(jx_fn, opts.batch)
            drain()
            ia_times.append(t_ia)
            jx_times.append(t_jx)
            ratios.append(t_ia / t_jx)
        results[label] = {
            "ironaccel_ns": statistics.median(ia_times),
            "jax_ns": statistics.median(jx_times),
            "median_ratio": statistics.median(ratios),
        }

    info = {
        "host": platform.node(),
        "python": platform.python_version(),
        "plugin": client.plugin.name,
        "plugin_api": client.api.version_string,
        "platform": client.platform_name,
        "device": device.kind,
        "jax": jax.__version__,
        "jax_backend": jax.default_backend(),
        "jax_device": str(jax_device),
        "program": program,
        "n": n,
        "pairs": opts.pairs,
        "batch": opts.batch,
        "results": results,
    }
    print(f"{client.plugin.name} (PJRT API {client.api.version_string}, {device.kind}) vs JAX {jax.__version__} "
          f"on {jax_device}; float32[{n}] multiply-add, {program} StableHLO; {opts.pairs} pairs x {opts.batch}")
    print(f"{'operation':<12} {'ironaccel us':>13} {'JAX us':>9} {'median ratio':>13}")
    for label, r in results.items():
        print(f"{label:<12} {r['ironaccel_ns'] / 1e3:>13.2f} {r['jax_ns'] / 1e3:>9.2f} {r['median_ratio']:>13.3f}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(info, f, indent=2)
    del jnp
    client.close()


if __name__ == "__main__":
    main()
