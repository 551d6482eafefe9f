"""ironaccel backend: Qualcomm AI Engine Direct (QNN) through ctypes.

Importing this package loads no vendor library; the backend loads it on probe."""

__version__ = "0.1.0"
