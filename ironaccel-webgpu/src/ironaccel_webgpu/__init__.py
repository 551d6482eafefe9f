"""ironaccel backend: WebGPU compute on wgpu-py.

Importing this package loads no vendor library; the backend loads it on probe."""

__version__ = "0.1.0"
