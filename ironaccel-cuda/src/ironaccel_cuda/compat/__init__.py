"""Drop-in surfaces of other CUDA libraries, built on ironaccel_cuda's own objects.

`ironaccel_cuda.compat.cuda_core` speaks NVIDIA cuda.core 1.2; its `install()` makes
`import cuda.core` resolve to it, so a codebase moves with one line at start-up.
"""
