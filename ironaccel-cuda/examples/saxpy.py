"""saxpy on the GPU with ironaccel-cuda: compile, copy in, launch, copy back, check.

    python examples/saxpy.py
"""

import numpy as np

import ironaccel
import ironaccel_cuda as cu

SOURCE = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def main() -> None:
    dev = ironaccel.open("cuda", 0)  # the same object as cu.Device(0)
    print(f"{dev.name} ({dev.arch}), {dev.total_memory / 2**30:.1f} GiB")

    code = cu.Program(SOURCE, cu.CompileOptions(std="c++17")).compile()  # CUBIN for this GPU, cached
    saxpy = dev.load_module(code).function("saxpy")

    n = 1 << 20
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    a = np.float32(2.0)

    dx, dy = dev.alloc(n, "float32"), dev.alloc(n, "float32")
    dx.copy_from(x)
    dy.copy_from(y)
    saxpy.launch((n + 255) // 256, 256, a, dx, dy, np.uint32(n))
    result = dy.copy_to_host()

    np.testing.assert_allclose(result, a * x + y, rtol=1e-5, atol=1e-6)
    dx.close()
    dy.close()
    print("saxpy ok")


if __name__ == "__main__":
    main()
