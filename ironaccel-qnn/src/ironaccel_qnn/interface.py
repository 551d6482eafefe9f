"""QnnInterface_getProviders through ctypes, reading only the version-stable head of QnnInterface_t.

QnnInterface_t is ``{uint32_t backendId; const char* providerName;
Qnn_ApiVersion_t apiVersion; <function table>}``.  The head is stable; the
function table's layout changed across API 2.x releases (backendSetConfig was
inserted at slot 2), so it is never indexed here.  The build id comes from the
exported ``QnnBackend_getBuildId`` when the library exports it.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

#: Known backend ids (QnnCommon.h).
BACKEND_IDS = {0: "null", 1: "reference", 2: "saver", 3: "cpu", 4: "gpu", 5: "dsp", 6: "htp", 7: "hta", 8: "lpai"}

#: QnnCommon_Error_t and the success value (QnnCommon.h); an error handle's low 16 bits are the code.
ERROR_NAMES: dict[int, str] = {
    0: "QNN_SUCCESS",
    1000: "QNN_COMMON_ERROR_NOT_SUPPORTED",
    1002: "QNN_COMMON_ERROR_MEM_ALLOC",
    1003: "QNN_COMMON_ERROR_SYSTEM",
    1004: "QNN_COMMON_ERROR_INVALID_ARGUMENT",
    1005: "QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED",
    1006: "QNN_COMMON_ERROR_PLATFORM_NOT_SUPPORTED",
    1007: "QNN_COMMON_ERROR_SYSTEM_COMMUNICATION",
    1008: "QNN_COMMON_ERROR_INCOMPATIBLE_BINARIES",
    1009: "QNN_COMMON_ERROR_LOADING_BINARIES",
    1010: "QNN_COMMON_ERROR_RESOURCE_UNAVAILABLE",
    1100: "QNN_COMMON_ERROR_GENERAL",
}


def error_code(handle: int) -> int:
    """QNN_GET_ERROR_CODE: the low 16 bits of a Qnn_ErrorHandle_t."""
    return handle & 0xFFFF


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"QNN_ERROR_{code}")


class Version(ctypes.Structure):
    """Qnn_Version_t."""

    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("patch", ctypes.c_uint32)]

    @property
    def text(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


class ApiVersion(ctypes.Structure):
    """Qnn_ApiVersion_t."""

    _fields_ = [("coreApiVersion", Version), ("backendApiVersion", Version)]


class InterfaceHead(ctypes.Structure):
    """The stable head of QnnInterface_t (and of QnnSystemInterface_t, which starts the same way)."""

    _fields_ = [("backendId", ctypes.c_uint32), ("providerName", ctypes.c_char_p), ("apiVersion", ApiVersion)]


@dataclass(frozen=True)
class Provider:
    """One interface provider of a QNN library."""

    backend_id: int
    name: str
    core_api: str
    backend_api: str

    @property
    def backend(self) -> str:
        return BACKEND_IDS.get(self.backend_id, str(self.backend_id))


class ProvidersError(Exception):
    def __init__(self, symbol: str, code: int):
        super().__init__(f"{symbol} returned {error_name(code)} ({code})")
        self.symbol, self.code = symbol, code


def providers(lib: ctypes.CDLL, symbol: str = "QnnInterface_getProviders") -> list[Provider]:
    """Call `symbol` (QnnInterface_getProviders or QnnSystemInterface_getProviders); AttributeError if absent."""
    fn = getattr(lib, symbol)
    fn.argtypes = [ctypes.POINTER(ctypes.POINTER(ctypes.POINTER(InterfaceHead))), ctypes.POINTER(ctypes.c_uint32)]
    fn.restype = ctypes.c_uint64
    table = ctypes.POINTER(ctypes.POINTER(InterfaceHead))()
    count = ctypes.c_uint32(0)
    code = error_code(fn(ctypes.byref(table), ctypes.byref(count)))
    if code != 0:
        raise ProvidersError(symbol, code)
    out = []
    for i in range(count.value if table else 0):
        head = table[i].contents
        out.append(Provider(
            head.backendId,
            (head.providerName or b"").decode(errors="replace"),
            head.apiVersion.coreApiVersion.text,
            head.apiVersion.backendApiVersion.text,
        ))
    return out


def build_id(lib: ctypes.CDLL) -> str | None:
    """QnnBackend_getBuildId, when the library exports it (the SDK's build, e.g. v2.20.0.240223)."""
    fn = getattr(lib, "QnnBackend_getBuildId", None)
    if fn is None:
        return None
    fn.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
    fn.restype = ctypes.c_uint64
    value = ctypes.c_char_p()
    if error_code(fn(ctypes.byref(value))) != 0 or not value.value:
        return None
    return value.value.decode(errors="replace")
