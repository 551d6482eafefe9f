"""Where the QNN libraries are: the SDK's per-target lib folder, or an explicit path.

Searched in order: ``IRONACCEL_QNN_LIBRARY`` (the backend library file, or
folders), ``$QNN_SDK_ROOT/lib/<target>`` for this host's targets (the SDK's
layout, e.g. ``lib/x86_64-linux-clang``, ``lib/aarch64-android``), the
``ironaccel_library_dirs`` hook, LD_LIBRARY_PATH, the system folders and the
dynamic loader.
"""

from __future__ import annotations

import os
import platform
import sys

ENV_LIBRARY = "IRONACCEL_QNN_LIBRARY"
ENV_SDK_ROOT = "QNN_SDK_ROOT"

HTP_NAMES = ("QnnHtp.dll",) if sys.platform == "win32" else ("libQnnHtp.so",)
SYSTEM_NAMES = ("QnnSystem.dll",) if sys.platform == "win32" else ("libQnnSystem.so",)

FIX = (
    "install the Qualcomm AI Engine Direct (QNN / QAIRT) SDK and set QNN_SDK_ROOT to it, "
    f"or point {ENV_LIBRARY} at the folder holding libQnnHtp.so"
)


def host_targets() -> tuple[str, ...]:
    """The SDK's lib/<target> folder names that can run on this host, most specific first."""
    machine = platform.machine().lower()
    arm = machine in ("aarch64", "arm64")
    if sys.platform == "win32":
        return ("aarch64-windows-msvc", "arm64x-windows-msvc") if arm else ("x86_64-windows-msvc",)
    if hasattr(sys, "getandroidapilevel") or "ANDROID_ROOT" in os.environ:
        return ("aarch64-android",)
    if arm:
        return ("aarch64-oe-linux-gcc11.2", "aarch64-ubuntu-gcc9.4", "aarch64-oe-linux-gcc9.3", "aarch64-android")
    return ("x86_64-linux-clang",)


def sdk_dirs() -> list[str]:
    """``$QNN_SDK_ROOT/lib/<target>`` for this host's targets (empty without QNN_SDK_ROOT)."""
    root = os.environ.get(ENV_SDK_ROOT)
    if not root:
        return []
    return [os.path.join(root, "lib", target) for target in host_targets()]


def emulated() -> bool:
    """True on x86_64 hosts, where libQnnHtp.so is the SDK's CPU emulation of the NPU."""
    return platform.machine().lower() in ("x86_64", "amd64")
