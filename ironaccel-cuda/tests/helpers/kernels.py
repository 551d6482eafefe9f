"""CUDA C++ kernels shared by the GPU tests (also implemented by the fake driver of tests/fakecuda)."""

SOURCE = r"""
extern "C" __global__ void scale_offset(const float* x, float* y, float a, float b, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}

extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

namespace templated {
template <typename T> __global__ void saxpy(T a, const T* x, T* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
}

// Writes each scalar parameter, as raw bytes, at its offset in the kernel's parameter block.
extern "C" __global__ void echo16(unsigned char* out, char a, short b, int c, long long d, float e, double f,
                                  unsigned char g, unsigned short h, unsigned int i, unsigned long long j,
                                  float k, double l, int m, float n, unsigned long long o) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
#define PUT(off, v) { auto t_ = (v); memcpy(out + (off), &t_, sizeof t_); }
    PUT(8, a) PUT(10, b) PUT(12, c) PUT(16, d) PUT(24, e) PUT(32, f) PUT(40, g) PUT(42, h)
    PUT(44, i) PUT(48, j) PUT(56, k) PUT(64, l) PUT(72, m) PUT(76, n) PUT(80, o)
#undef PUT
}

// Writes through whatever pointer it is given: launched with a bad one, it faults.
extern "C" __global__ void fault(float* p) { p[threadIdx.x] = 1.0f; }

// Busy-waits for `cycles` clock ticks: keeps a stream busy for query() and timing tests.
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""

# The fake driver knows this template instance by its mangled name; the GPU tests use the name expression.
NAME_EXPRESSIONS = ["templated::saxpy<float>"]

# A kernel calling a device function defined in another translation unit, and that function: the linking tests.
LINK_CALLER = r"""
extern "C" __device__ float scale(float x);
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * scale(x[i]) + y[i];
}
"""
LINK_CALLEE = r"""extern "C" __device__ float scale(float x) { return 2.0f * x; }"""
