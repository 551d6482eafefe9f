"""Drop-in surfaces of other CUDA Python libraries, built on ironaccel_cuda's own objects.

`compat.cuda_core` speaks NVIDIA cuda.core 1.2 and `compat.pycuda` PyCUDA's driver layer; each `install()`
makes `import cuda.core` / `import pycuda` resolve to it, so a codebase moves with one line at start-up.
"""
