"""ironaccel backend: AMD ROCm/HIP on hip-python.

Importing this package loads no vendor library; the backend loads it on probe."""

__version__ = "0.1.0"
