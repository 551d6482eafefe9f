"""Build the fake libamdhip64 (fakehip/fake_amdhip64.c) against ROCm's real headers and point hip-python at it.

This folder runs in its own process (tests/test_against_fake.py starts it): hip-python loads
``$ROCM_PATH/lib/libamdhip64.so`` once per process, so the fake must be in place before anything calls HIP.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from pathlib import Path

HEADER = Path("/usr/include/hip/hip_runtime_api.h")
SOURCE = Path(__file__).parent / "fakehip" / "fake_amdhip64.c"
#: hipDeviceProp_t fields the fake fills, at the offsets hip-python 10 reads them (ROCm 6's R0600 layout).
FIELDS = ("totalGlobalMem", "sharedMemPerBlock", "multiProcessorCount", "warpSize", "maxThreadsPerBlock",
          "clockRate", "l2CacheSize", "major", "minor", "unifiedAddressing", "canMapHostMemory",
          "memoryPoolsSupported", "asyncEngineCount", "streamPrioritiesSupported")


def _layout() -> dict[str, int]:
    """Offsets of hipDeviceProp_t's fields in hip-python's struct, found by writing each and reading the bytes."""
    from hip import hip

    props = hip.hipDeviceProp_t()
    size = int(props.c_sizeof())
    addr = props.as_c_void_p().value
    out = {"PROP_SIZE": size}
    for field in FIELDS:
        ctypes.memset(addr, 0, size)
        setattr(props, field, 1)
        out[f"OFF_{field}"] = next(i for i, b in enumerate(ctypes.string_at(addr, size)) if b)
    for field in ("name", "gcnArchName"):  # char arrays: find where a marker written there reads back
        for offset in range(0, size - 8):
            ctypes.memset(addr, 0, size)
            ctypes.memmove(addr + offset, b"Zq7\0", 4)
            value = getattr(props, field)
            if (value.encode() if isinstance(value, str) else bytes(value))[:3] == b"Zq7":
                out[f"OFF_{field}"] = offset
                break
    return out


def _build() -> None:
    from ironaccel.testing import cbuild

    folder = Path(tempfile.mkdtemp(prefix="fakehip-"))
    defines = [f"-D{k}={v}" for k, v in _layout().items()]
    cbuild.shared_library([SOURCE], folder / "lib" / "libamdhip64.so", headers=[HEADER],
                          flags=["-D__HIP_PLATFORM_AMD__", *defines], std="gnu11")
    os.environ["ROCM_PATH"] = str(folder)
    os.environ["HIP_PATH"] = str(folder)
    # hipRTC is the real one, loaded from ROCm's own libamdhip64 (the fake has none).
    os.environ.setdefault("IRONACCEL_HIPRTC_LIBRARY", "/usr/lib/x86_64-linux-gnu/libamdhip64.so")


_build()
