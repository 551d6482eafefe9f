"""Vulkan command batch: recorded once, re-bound and re-submitted, timed per dispatch; two queues and a fence.

    python examples/vulkan_batch.py [--size 4096]

The kernels are the Vulkan conformance kernels (GLSL in ironaccel-vulkan/tests/kernels/*.comp, SPIR-V
beside them):

* typed_params: y = a * x + pair[0] - pair[1] * k, its push-constant block {a, pair, n, k} given by name;
* constants:    z = y * SCALE + BIAS, SCALE and BIAS specialization constants fixed when the pipeline is made.

One batch writes x, runs both dispatches and reads z back.  It is recorded once and submitted three times:
as recorded, with a new x and a new `a` (a param re-bound), and with its second dispatch writing another
buffer (a buffer re-bound).  Where the device has timestamps each submit prints the device time of each
command.  Where it has two queues (a GPU; lavapipe has one) the first kernel runs on a second queue and
the default queue waits for it on a timeline fence.  Every result is checked against numpy; the exit status
is nonzero on a mismatch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import ironaccel
from ironaccel.errors import Unsupported

KERNELS = Path(__file__).resolve().parents[1] / "ironaccel-vulkan" / "tests" / "kernels"
SCALE, BIAS = 2.0, 1


def expected(x: np.ndarray, a: float, pair: tuple[float, float], k: int) -> np.ndarray:
    y = np.float32(a) * x + np.float32(pair[0]) - np.float32(pair[1]) * np.float32(k)
    return y * np.float32(SCALE) + np.float32(BIAS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=4096, help="float32 elements")
    args = parser.parse_args()
    n = args.size
    groups = (n + 63) // 64
    device = ironaccel.open("vulkan")
    failures = 0

    def check(what: str, got: np.ndarray, want: np.ndarray) -> None:
        nonlocal failures
        ok = np.allclose(got, want, rtol=1e-5, atol=1e-5)
        failures += not ok
        print(f"{what}: {'ok' if ok else 'MISMATCH'}")

    try:
        print(f"device: {device.descriptor.name}; features: {', '.join(sorted(device.features))}")
        typed = device.pipeline((KERNELS / "typed_params.spv").read_bytes(), buffers=2, workgroup_size=(64, 1, 1))
        special = device.pipeline((KERNELS / "constants.spv").read_bytes(), buffers=2, workgroup_size=(64, 1, 1),
                                  constants={"SCALE": SCALE, "BIAS": BIAS})
        print("params block:", typed.interface.params.describe())
        print("constants:", [(c.name, c.dtype.value if c.dtype else None) for c in special.interface.constants])

        rng = np.random.default_rng(0)
        data = rng.standard_normal(n).astype(np.float32)
        x, y, z = device.alloc(n, "float32"), device.alloc(n, "float32"), device.alloc(n, "float32")
        out = np.zeros(n, np.float32)
        params = {"a": 1.5, "pair": (0.25, 0.5), "n": n, "k": 3}
        timed = "timestamps" in device.features
        batch = device.batch(timestamps=timed)
        load = batch.write(x, data)
        first = batch.dispatch(typed, [x, y], groups, params)
        second = batch.dispatch(special, [y, z], groups, (np.uint32(n),))
        batch.read(z, out)

        def submit(what: str) -> None:
            submission = device.submit(batch)
            submission.wait(timeout=60)
            line = ""
            if timed:
                timings = submission.timings()
                line = (f" (device time {timings.total_ns / 1e3:.1f} us; per command "
                        f"{[round(ns / 1e3, 1) for ns in timings.commands_ns]} us)")
            print(f"submit {what}{line}")

        submit("as recorded")
        check("  z", out, expected(data, 1.5, (0.25, 0.5), 3))

        fresh = rng.standard_normal(n).astype(np.float32)
        load.update(array=fresh)
        first.update(params={**params, "a": -1.0})  # a param re-bound by name
        submit("with a new x and a = -1")
        check("  z", out, expected(fresh, -1.0, (0.25, 0.5), 3))

        other_z = device.alloc(n, "float32")
        second.update(buffers=[y, other_z])  # a buffer re-bound
        submit("writing another buffer")
        check("  the other buffer", device.download(other_z), expected(fresh, -1.0, (0.25, 0.5), 3))
        batch.close()

        if "queues" in device.features and "fences" in device.features:
            queue = device.create_queue()
            fence = device.create_fence()
            queue.dispatch(typed, [x, y], groups, {**params, "a": 3.0})
            queue.signal(fence, 1)  # the second queue signals 1 when its dispatch is done
            device.queue.wait(fence, 1)  # the default queue waits for it on the device
            device.dispatch(special, [y, z], groups, (np.uint32(n),))
            check(f"two queues (queue {queue.index} then the default one, ordered by a fence)", device.download(z),
                  expected(fresh, 3.0, (0.25, 0.5), 3))
            queue.close()
            fence.close()
        else:
            try:
                device.create_queue()
            except Unsupported as exc:
                print(f"one queue only: {exc}")
    finally:
        device.close()
    if failures:
        print(f"{failures} results did not match numpy", file=sys.stderr)
        return 1
    print("all results match numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
