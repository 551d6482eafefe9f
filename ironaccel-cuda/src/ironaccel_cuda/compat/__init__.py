"""Drop-in surfaces of other CUDA Python libraries, built on ironaccel_cuda (`compat.pycuda`)."""
