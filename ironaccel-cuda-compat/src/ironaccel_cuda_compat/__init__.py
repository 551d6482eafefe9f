"""Drop-in surfaces of other CUDA Python libraries, built on ironaccel_cuda's own objects.

`ironaccel_cuda_compat.cuda_core` speaks NVIDIA cuda.core 1.2 and `ironaccel_cuda_compat.pycuda` PyCUDA's driver
layer; each `install()` makes `import cuda.core` / `import pycuda` resolve to it, so a codebase moves with one
line at start-up.  A distribution of its own (ironaccel-cuda-compat) over ironaccel-cuda; the old
`ironaccel_cuda.compat` names still import, with a DeprecationWarning, for one minor release.
"""

__version__ = "0.2.0"

__all__: list[str] = []  # the surfaces are its submodules: cuda_core, pycuda
