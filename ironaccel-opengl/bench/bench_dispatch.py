"""Benchmark (not a test): ironaccel's opengl ComputeDevice against the same work written directly on moderngl.

    python ironaccel-opengl/bench/bench_dispatch.py [--pairs N] [--json out.json]

The cases (bench/dispatch_cases.py): round_trip, repeated and burst50 on 4 KiB, round_trip and repeated
on 64 MiB of float32.  Direct use is what a moderngl programmer writes: ctx.buffer(x),
ctx.buffer(reserve=...), the params uniform buffer written and bound, bind_to_storage_buffer, run,
memory_barrier, read_into, on a second context of the same EGL device.  Both sides are checked once, then
sampled together in rounds (bench/harness.py: batches of ~2 ms, the order alternating); each case reports
ironaccel / direct time with its bootstrap 95% interval against its target (bench/versus.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from dispatch_cases import ComputeSide, F, grid, pack_params, run_cases, scale
from versus import publish, report

GLSL = (Path(__file__).resolve().parents[1] / "tests" / "kernels" / "scale_offset.comp").read_text()


class Direct:
    """The same work on moderngl directly, in its own context (made current before each use)."""

    def __init__(self, moderngl: Any):
        self.ctx = moderngl.create_context(standalone=True, backend="egl", require=430)
        self.shader = self.ctx.compute_shader(GLSL)
        self.uniform = self.ctx.buffer(reserve=16)
        self.barrier = moderngl.SHADER_STORAGE_BARRIER_BIT | moderngl.BUFFER_UPDATE_BARRIER_BIT

    def bind(self, xb: Any, yb: Any) -> None:
        self.uniform.bind_to_uniform_block(0)
        xb.bind_to_storage_buffer(0)
        yb.bind_to_storage_buffer(1)

    def run_shader(self, n: int, a: float, b: float) -> None:
        self.uniform.write(pack_params(a, b, n, 0))
        self.shader.run(*grid(n))
        self.ctx.memory_barrier(self.barrier)

    def dispatch(self, xb: Any, yb: Any, n: int, a: float, b: float) -> None:
        self.bind(xb, yb)
        self.run_shader(n, a, b)

    def round_trip(self, x: np.ndarray) -> np.ndarray:
        with self.ctx:
            xb, yb = self.ctx.buffer(x), self.ctx.buffer(reserve=x.nbytes)
            self.dispatch(xb, yb, x.size, 2.0, 1.0)
            y = np.empty_like(x)
            yb.read_into(y)
            xb.release()
            yb.release()
            return y

    def persistent(self, x: np.ndarray) -> tuple[Callable[[int], np.ndarray], Callable[[], None]]:
        n, out = x.size, np.empty(x.size, F)
        with self.ctx:
            xb, yb = self.ctx.buffer(x), self.ctx.buffer(reserve=x.nbytes)

        def run(dispatches: int) -> np.ndarray:
            # The buffers stay bound in this context: a GL programmer binds them once for a run of dispatches
            # over the same buffers (ironaccel skips an unchanged binding too), then writes params and runs.
            with self.ctx:
                self.bind(xb, yb)
                for k in range(dispatches):
                    self.run_shader(n, scale(k), 1.0)
                yb.read_into(out)
                return out

        def close() -> None:
            with self.ctx:
                xb.release()
                yb.release()

        return run, close


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=41, help="rounds per 4 KiB case (64 MiB cases: a fifth, >= 5)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--no-baseline", action="store_true", help="do not overwrite bench/BASELINE.md")
    args = parser.parse_args(argv)
    if not os.environ.get("XDG_RUNTIME_DIR") or not os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="ironaccel-xdg-")

    import moderngl

    import ironaccel

    dev = ironaccel.open("opengl")
    try:
        cases = run_cases(ComputeSide(dev, GLSL), Direct(moderngl), args.pairs)
    finally:
        dev.close()
    facts = {"gl_version": dev.descriptor.extras["gl_version"]}
    publish(report("opengl", dev.descriptor.name, f"moderngl {moderngl.__version__}", facts, cases), args.json,
            baseline=None if args.no_baseline else Path(__file__).with_name("BASELINE.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
