"""ironaccel backend: PJRT C API plugins (TPU, GPU, CPU) through ctypes.

Importing this package loads no vendor library; the backend loads it on probe."""

__version__ = "0.1.0"
