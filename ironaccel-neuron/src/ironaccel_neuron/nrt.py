"""libnrt, the AWS Neuron runtime, through ctypes: find it, declare it, name its statuses.

Searched in order: ``IRONACCEL_NEURON_LIBRARY`` (a file, or folders),
``/opt/aws/neuron/lib``, the ``ironaccel_library_dirs`` hook, LD_LIBRARY_PATH,
the system folders and the dynamic loader; names ``libnrt.so.1``, ``libnrt.so``.

Only calls that the header documents as safe before ``nrt_init`` are made
here (version, NeuronCore counts): ``nrt_init`` claims the NeuronCores for the
whole process and cannot be redone after ``nrt_close``, so a probe must not
call it.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ironaccel.probing import load_library

BACKEND = "neuron"
ENV_LIBRARY = "IRONACCEL_NEURON_LIBRARY"
NAMES = ("libnrt.so.1", "libnrt.so")
EXTRA_DIRS = ("/opt/aws/neuron/lib",)
FIX = (
    "install the Neuron runtime (aws-neuronx-runtime-lib, which puts libnrt.so.1 in /opt/aws/neuron/lib) "
    f"on an inf1/inf2/trn1/trn2 instance, or point {ENV_LIBRARY} at libnrt"
)

RT_VERSION_DETAIL_LEN = 128
GIT_HASH_LEN = 64

#: NRT_STATUS, from nrt/nrt_status.h.
STATUS_NAMES: dict[int, str] = {
    0: "NRT_SUCCESS",
    1: "NRT_FAILURE",
    2: "NRT_INVALID",
    3: "NRT_INVALID_HANDLE",
    4: "NRT_RESOURCE",
    5: "NRT_TIMEOUT",
    6: "NRT_HW_ERROR",
    7: "NRT_QUEUE_FULL",
    9: "NRT_LOAD_NOT_ENOUGH_NC",
    10: "NRT_UNSUPPORTED_NEFF_VERSION",
    11: "NRT_FAIL_HOST_MEM_ALLOC",
    13: "NRT_UNINITIALIZED",
    14: "NRT_CLOSED",
    15: "NRT_QUEUE_EMPTY",
    1002: "NRT_EXEC_BAD_INPUT",
    1003: "NRT_EXEC_COMPLETED_WITH_NUM_ERR",
    1004: "NRT_EXEC_COMPLETED_WITH_ERR",
    1005: "NRT_EXEC_NC_BUSY",
    1100: "NRT_COLL_PENDING",
}


def status_name(code: int) -> str:
    """The name of an NRT_STATUS (``NRT_STATUS_<code>`` if unknown)."""
    return STATUS_NAMES.get(code, f"NRT_STATUS_{code}")


class Version(ctypes.Structure):
    """nrt_version_t."""

    _fields_ = [
        ("rt_major", ctypes.c_uint64),
        ("rt_minor", ctypes.c_uint64),
        ("rt_patch", ctypes.c_uint64),
        ("rt_maintenance", ctypes.c_uint64),
        ("rt_detail", ctypes.c_char * RT_VERSION_DETAIL_LEN),
        ("git_hash", ctypes.c_char * GIT_HASH_LEN),
    ]

    @property
    def text(self) -> str:
        return f"{self.rt_major}.{self.rt_minor}.{self.rt_patch}.{self.rt_maintenance}"


@dataclass(frozen=True)
class Runtime:
    lib: ctypes.CDLL
    path: str

    def has(self, name: str) -> bool:
        return hasattr(self.lib, name)


#: What the probe cannot do without (nrt_get_visible_nc_count is optional: older runtimes lack it).
REQUIRED = ("nrt_get_version", "nrt_get_total_nc_count")


def load() -> Runtime:
    """dlopen libnrt and declare what the probe calls; NotAvailable lists every path searched."""
    found = load_library(BACKEND, NAMES, env_var=ENV_LIBRARY, extra_dirs=EXTRA_DIRS, fix=FIX, symbols=REQUIRED)
    lib = found.handle
    signatures = {
        "nrt_get_version": [ctypes.POINTER(Version), ctypes.c_size_t],
        "nrt_get_total_nc_count": [ctypes.POINTER(ctypes.c_uint32)],
        "nrt_get_visible_nc_count": [ctypes.POINTER(ctypes.c_uint32)],
    }
    for name, argtypes in signatures.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int
    return Runtime(lib, found.path)
