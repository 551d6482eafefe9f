"""A VkInstance: API version, layers, the debug messenger, physical devices.

Each Backend probe and each opened device owns one Instance, so a device's
teardown is complete on its own and a probe leaves nothing behind.
"""

from __future__ import annotations

import os
from typing import Any

from ironaccel.errors import NotAvailable

from . import results, validation
from .binding import BACKEND, Binding

__all__ = ["Instance", "version_string", "make_version", "API_1_0", "API_1_1", "API_1_2", "API_1_3"]

VK_STRUCTURE_TYPE_APPLICATION_INFO = 0
VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT = 1000128004
VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR = 0x1
PORTABILITY_ENUMERATION = "VK_KHR_portability_enumeration"
VALIDATION_FEATURES = "VK_EXT_validation_features"
VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT = 1000247000
VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION = 4


def make_version(major: int, minor: int, patch: int = 0) -> int:
    return (major << 22) | (minor << 12) | patch


def version_string(version: int) -> str:
    """"1.3.230" from a packed VK_MAKE_API_VERSION."""
    return f"{(version >> 22) & 0x7F}.{(version >> 12) & 0x3FF}.{version & 0xFFF}"


API_1_0 = make_version(1, 0)
API_1_1 = make_version(1, 1)
API_1_2 = make_version(1, 2)
API_1_3 = make_version(1, 3)
DRIVER_ENV_VARS = ("VK_DRIVER_FILES", "VK_ICD_FILENAMES", "VK_ADD_DRIVER_FILES")


class Instance:
    """An owned VkInstance, with a MessageLog fed by a debug-utils messenger when one is available."""

    def __init__(self, binding: Binding, *, validation_layer: bool = False):
        self.binding = binding
        ffi, lib = binding.ffi, binding.lib
        self.handle: Any = None
        self.messenger: Any = None
        self.log = validation.MessageLog()
        self.validation_layer = validation_layer
        self.loader_version = self._loader_version()
        self.api_version = min(self.loader_version, API_1_3)

        extensions = self._names("vkEnumerateInstanceExtensionProperties", "VkExtensionProperties", "extensionName")
        layers = self._names("vkEnumerateInstanceLayerProperties", "VkLayerProperties", "layerName")
        self.layers_available = layers
        if validation_layer and validation.LAYER not in layers:
            raise NotAvailable(
                BACKEND,
                f"the validation layer {validation.LAYER} was requested ({validation.VALIDATION_ENV} or "
                f"validation=True) but is not installed",
                fix=f"apt-get install vulkan-validationlayers (or point VK_ADD_LAYER_PATH at it), or unset "
                f"{validation.VALIDATION_ENV}",
                code=results.VK_ERROR_LAYER_NOT_PRESENT,
                code_name="VK_ERROR_LAYER_NOT_PRESENT",
            )
        enabled_ext = [e for e in (validation.DEBUG_UTILS, PORTABILITY_ENUMERATION) if e in extensions]
        enabled_layers = [validation.LAYER] if validation_layer else []
        if validation_layer and validation.DEBUG_UTILS not in enabled_ext:
            layer_ext = self._names("vkEnumerateInstanceExtensionProperties", "VkExtensionProperties",
                                    "extensionName", layer=validation.LAYER)
            if validation.DEBUG_UTILS in layer_ext:
                enabled_ext.append(validation.DEBUG_UTILS)
        self.sync_validation = False
        if validation_layer:
            layer_ext = self._names("vkEnumerateInstanceExtensionProperties", "VkExtensionProperties",
                                    "extensionName", layer=validation.LAYER)
            self.sync_validation = VALIDATION_FEATURES in layer_ext
            if self.sync_validation:
                enabled_ext.append(VALIDATION_FEATURES)
        self.debug_utils = validation.DEBUG_UTILS in enabled_ext

        keep: list[Any] = []
        c_str = self._c_strings
        app = ffi.new(
            "VkApplicationInfo*",
            {
                "sType": VK_STRUCTURE_TYPE_APPLICATION_INFO,
                "pApplicationName": c_str(keep, ["ironaccel"])[0],
                "pEngineName": c_str(keep, ["ironaccel"])[0],
                "apiVersion": self.api_version,
            },
        )
        ext_array = c_str(keep, enabled_ext)
        layer_array = c_str(keep, enabled_layers)
        self._callback = validation.make_callback(ffi) if self.debug_utils else None
        self._log_handle = ffi.new_handle(self.log)
        messenger_info = self._messenger_info() if self.debug_utils else ffi.NULL
        first = messenger_info
        if self.sync_validation:  # also check the barriers between dispatches and copies
            enables = ffi.new("VkValidationFeatureEnableEXT[1]", [VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION])
            keep.append(enables)
            first = ffi.new("VkValidationFeaturesEXT*", {
                "sType": VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT, "pNext": messenger_info,
                "enabledValidationFeatureCount": 1, "pEnabledValidationFeatures": enables})
            keep.append(first)
        info = ffi.new(
            "VkInstanceCreateInfo*",
            {
                "sType": VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                "pNext": first,
                "flags": VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR if PORTABILITY_ENUMERATION in enabled_ext
                else 0,
                "pApplicationInfo": app,
                "enabledLayerCount": len(enabled_layers),
                "ppEnabledLayerNames": layer_array if enabled_layers else ffi.NULL,
                "enabledExtensionCount": len(enabled_ext),
                "ppEnabledExtensionNames": ext_array if enabled_ext else ffi.NULL,
            },
        )
        out = ffi.new("VkInstance*")
        result = lib.vkCreateInstance(info, ffi.NULL, out)
        if result != results.VK_SUCCESS:
            raise self._create_failed(result)
        self.handle = out[0]
        if self.debug_utils:
            create = self.proc("vkCreateDebugUtilsMessengerEXT")
            messenger = ffi.new("VkDebugUtilsMessengerEXT*")
            if create(self.handle, messenger_info, ffi.NULL, messenger) == results.VK_SUCCESS:
                self.messenger = messenger[0]

    # -- construction helpers -------------------------------------------------------------------------------

    def _loader_version(self) -> int:
        ffi, lib = self.binding.ffi, self.binding.lib
        try:
            fn = lib.vkEnumerateInstanceVersion
        except AttributeError:  # a Vulkan 1.0 loader
            return API_1_0
        out = ffi.new("uint32_t*")
        return out[0] if fn(out) == results.VK_SUCCESS else API_1_0

    def _names(self, fn_name: str, ctype: str, field: str, layer: str | None = None) -> list[str]:
        ffi, lib = self.binding.ffi, self.binding.lib
        fn = getattr(lib, fn_name)
        count = ffi.new("uint32_t*")
        args = ((ffi.new("char[]", layer.encode()) if layer else ffi.NULL),) if "Extension" in fn_name else ()
        results.check(fn_name, fn(*args, count, ffi.NULL))
        items = ffi.new(f"{ctype}[]", count[0])
        results.check(fn_name, fn(*args, count, items))
        return [ffi.string(getattr(items[i], field)).decode() for i in range(count[0])]

    def _c_strings(self, keep: list[Any], names: list[str]) -> Any:
        ffi = self.binding.ffi
        strings = [ffi.new("char[]", n.encode()) for n in names]
        keep.extend(strings)
        array = ffi.new("char*[]", strings or [ffi.NULL])
        keep.append(array)
        return array

    def _messenger_info(self) -> Any:
        ffi = self.binding.ffi
        self._messenger_create_info = ffi.new(
            "VkDebugUtilsMessengerCreateInfoEXT*",
            {
                "sType": VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
                "messageSeverity": validation.SEVERITY_WARNING | validation.SEVERITY_ERROR,
                "messageType": validation.TYPE_GENERAL | validation.TYPE_VALIDATION | validation.TYPE_PERFORMANCE,
                "pfnUserCallback": self._callback,
                "pUserData": self._log_handle,
            },
        )
        return self._messenger_create_info

    def _create_failed(self, result: int) -> NotAvailable:
        name = results.result_name(result)
        loader = self.binding.loader_path
        drivers = ", ".join(f"{v}={os.environ[v]}" for v in DRIVER_ENV_VARS if os.environ.get(v))
        where = f" ({drivers})" if drivers else ""
        if result == results.VK_ERROR_INCOMPATIBLE_DRIVER:
            reason = f"the Vulkan loader {loader} found no usable driver (ICD){where}: vkCreateInstance returned " \
                     f"{name} ({result})"
            fix = "install a Vulkan driver (mesa-vulkan-drivers gives lavapipe on CPU; on NVIDIA point " \
                  "VK_DRIVER_FILES at nvidia_icd.json)"
        else:
            reason = f"vkCreateInstance failed with {name} ({result}) (loader {loader}{where})"
            fix = "check the Vulkan driver installation (vulkaninfo --summary shows the same failure)"
        messages = "; ".join(str(m) for m in self.log.since(0))
        if messages:
            reason += f"; loader says: {messages}"
        if "static TLS block" in messages:  # seen on NVIDIA once other TLS-heavy libraries were loaded first
            fix = ("the driver could not get static thread-local storage in this process: start Python with "
                   "GLIBC_TUNABLES=glibc.rtld.optional_static_tls=32768, or create the Vulkan instance before "
                   "loading other GPU libraries")
        return NotAvailable(BACKEND, reason, fix=fix, code=result, code_name=name, library=loader)

    # -- use ------------------------------------------------------------------------------------------------

    def proc(self, name: str) -> Any:
        """An instance-level function pointer, cast to its PFN type; NotAvailable if the loader lacks it."""
        ffi, lib = self.binding.ffi, self.binding.lib
        ptr = lib.vkGetInstanceProcAddr(self.handle, name.encode())
        if ptr == ffi.NULL:
            raise NotAvailable(BACKEND, f"the Vulkan loader does not provide {name}")
        return ffi.cast(f"PFN_{name}", ptr)

    def physical_devices(self) -> list[Any]:
        """Every VkPhysicalDevice; NotAvailable with the VkResult when there is none."""
        ffi, lib = self.binding.ffi, self.binding.lib
        count = ffi.new("uint32_t*")
        result = lib.vkEnumeratePhysicalDevices(self.handle, count, ffi.NULL)
        if result == results.VK_SUCCESS and count[0]:
            handles = ffi.new("VkPhysicalDevice[]", count[0])
            result = lib.vkEnumeratePhysicalDevices(self.handle, count, handles)
            if result in (results.VK_SUCCESS, 5):  # VK_INCOMPLETE: a device vanished in between
                return [handles[i] for i in range(count[0])]
        name = results.result_name(result)
        detail = f"returned {name} ({result})" if result else "returned VK_SUCCESS with no device"
        raise NotAvailable(
            BACKEND,
            f"the Vulkan loader {self.binding.loader_path} found a driver but no physical device: "
            f"vkEnumeratePhysicalDevices {detail}",
            fix="check that the GPU is visible (/dev/dri, /dev/nvidia*) and that its ICD matches the driver",
            code=result,
            code_name=name,
        )

    def close(self) -> None:
        """Destroy the messenger and the instance; a second call is a no-op."""
        if self.handle is None:
            return
        ffi, lib = self.binding.ffi, self.binding.lib
        if self.messenger is not None:
            self.proc("vkDestroyDebugUtilsMessengerEXT")(self.handle, self.messenger, ffi.NULL)
            self.messenger = None
        lib.vkDestroyInstance(self.handle, ffi.NULL)
        self.handle = None
