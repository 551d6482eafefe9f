"""The QNN backend (Qualcomm AI Engine Direct, HTP = the Hexagon NPU): probe and describe.

Probe steps: find libQnnHtp (sdk.py says where), QnnInterface_getProviders,
then the build id (QnnBackend_getBuildId, when exported) and libQnnSystem
beside it.  The HTP backend drives one NPU, so an available backend lists one
device; on an x86_64 host the library is the SDK's emulator and the device
says so (tier SOFTWARE, extras["emulated"]).  Opening it (backend, device,
context, graphs) comes in a later issue and raises Unsupported.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

from ironaccel.errors import NotAvailable, Unsupported
from ironaccel.probing import ProbedBackend, ProbeFacts, check_ordinal, load_library
from ironaccel.types import CapabilityFlags, ComputeTier, DeviceDescriptor, DeviceKind, Vendor

from . import interface, sdk

BACKEND = "qnn"


class Backend(ProbedBackend[list[DeviceDescriptor]]):
    """Qualcomm QNN HTP through ctypes on libQnnHtp / libQnnSystem."""

    name = BACKEND

    def _probe(self, facts: ProbeFacts) -> list[DeviceDescriptor]:
        try:
            found = load_library(BACKEND, sdk.HTP_NAMES, env_var=sdk.ENV_LIBRARY, extra_dirs=sdk.sdk_dirs(),
                                 fix=sdk.FIX)
        except NotAvailable as exc:
            if os.environ.get(sdk.ENV_SDK_ROOT) or os.environ.get(sdk.ENV_LIBRARY):
                raise
            raise NotAvailable(BACKEND, f"{exc.reason}; neither {sdk.ENV_SDK_ROOT} nor {sdk.ENV_LIBRARY} is set",
                               fix=exc.fix, library=exc.library, searched=exc.searched) from None
        facts.record(library_path=found.path)
        try:
            providers = interface.providers(found.handle)
        except AttributeError:
            raise NotAvailable(BACKEND, f"{found.path} does not export QnnInterface_getProviders: not a QNN backend "
                               "library", fix=sdk.FIX) from None
        except interface.ProvidersError as exc:
            name = interface.error_name(exc.code)
            raise NotAvailable(BACKEND, f"{exc} ({found.path})", fix=sdk.FIX, code=exc.code, code_name=name) from None
        if not providers:
            raise NotAvailable(BACKEND, f"QnnInterface_getProviders of {found.path} returned no provider", fix=sdk.FIX)
        build = interface.build_id(found.handle)
        first = providers[0]
        facts.record(runtime_version=first.core_api, driver_version=build)
        facts.extra(
            providers=[{"name": p.name, "backend": p.backend, "core_api": p.core_api, "backend_api": p.backend_api}
                       for p in providers],
            build_id=build,
            system_library=_system_library(os.path.dirname(found.path)),
        )
        emulated = sdk.emulated()
        device = DeviceDescriptor(
            BACKEND, 0, "Qualcomm Hexagon NPU (QNN HTP" + (", emulated on the CPU)" if emulated else ")"),
            Vendor.QUALCOMM, DeviceKind.NPU, 0,
            ComputeTier.SOFTWARE if emulated else ComputeTier.MOBILE,
            CapabilityFlags.INT8 | CapabilityFlags.MATRIX_UNITS,
            {"provider": first.name, "backend_id": first.backend_id, "core_api": first.core_api,
             "backend_api": first.backend_api, "build_id": build, "emulated": emulated, "library": found.path},
        )
        facts.found(f"QNN HTP backend {build or ''}".strip(), 1)
        return [device]

    def devices(self) -> list[DeviceDescriptor]:
        """The QNN providers the probe found, as descriptors."""
        return list(self._state())

    def open(self, ordinal: int = 0) -> Any:
        """Check the ordinal, then raise Unsupported: opening the QNN HTP device is not implemented yet."""
        check_ordinal(BACKEND, ordinal, len(self._state()))
        raise Unsupported(BACKEND, "open", "opening the QNN HTP device (backend, context, graphs) is not "
                          "implemented yet; this backend probes and describes")


def _system_library(folder: str) -> str | None:
    """libQnnSystem beside the backend library, if it loads and has its providers entry point."""
    for name in sdk.SYSTEM_NAMES:
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            continue
        try:
            lib = ctypes.CDLL(path)
            interface.providers(lib, "QnnSystemInterface_getProviders")
        except (OSError, AttributeError, interface.ProvidersError):
            return None
        return path
    return None
