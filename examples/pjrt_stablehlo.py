"""Compile and run a StableHLO program on a PJRT plugin (the CPU plugin on any machine, a GPU or TPU plugin
where one is installed), without JAX.

    python examples/pjrt_stablehlo.py

Needs `pip install "ironaccel-pjrt[cpu]"` (or any PJRT plugin `.so` named by IRONACCEL_PJRT_PLUGIN).
"""

import numpy as np

import ironaccel

PROGRAM = """
func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<4xf32>
  %1 = stablehlo.add %0, %b : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""


def main() -> None:
    dev = ironaccel.open("pjrt", 0)  # device 0 of the first usable plugin
    try:
        a = np.arange(4, dtype=np.float32)
        b = np.full(4, 2.0, np.float32)
        (y,) = dev.run(PROGRAM, a, b)
        np.testing.assert_allclose(y, a * b + b)
        print(f"pjrt on {dev.descriptor.name}: {y}")
    finally:
        dev.close()


if __name__ == "__main__":
    main()
