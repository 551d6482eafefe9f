"""The DeviceDescriptor of an OpenGL context: GL_VENDOR/RENDERER/VERSION, compute limits, capability flags."""

from __future__ import annotations

import re
from typing import Any

from ironaccel.types import CapabilityFlags, ComputeTier, DeviceDescriptor, DeviceKind, Vendor

from .context import GLCalls
from .execution import timestamp_bits

BACKEND = "opengl"

_SOFTWARE = re.compile(r"llvmpipe|softpipe|swrast|lavapipe|swiftshader|software", re.I)
_DATACENTER = re.compile(r"\b(A100|A800|H100|H200|H800|GH200|B100|B200|GB200|L40S?|A40|A30|V100|MI\d{3}\w*|Instinct|"
                         r"Data Center GPU)\b", re.I)
_WORKSTATION = re.compile(r"\b(Quadro|RTX A\d{4}|RTX \d{4} Ada|Radeon Pro|Arc Pro)\b", re.I)
_VENDOR_WORDS = (("nvidia", Vendor.NVIDIA), ("llvmpipe", Vendor.MESA), ("softpipe", Vendor.MESA),
                 ("mesa", Vendor.MESA), ("amd", Vendor.AMD), ("ati technologies", Vendor.AMD),
                 ("radeon", Vendor.AMD), ("intel", Vendor.INTEL), ("apple", Vendor.APPLE),
                 ("qualcomm", Vendor.QUALCOMM), ("adreno", Vendor.QUALCOMM), ("arm", Vendor.ARM),
                 ("mali", Vendor.ARM), ("imagination", Vendor.IMAGINATION), ("microsoft", Vendor.MICROSOFT))
_FLAG_EXTENSIONS = (
    (CapabilityFlags.FP64, ("GL_ARB_gpu_shader_fp64",)),
    (CapabilityFlags.FP16, ("GL_AMD_gpu_shader_half_float", "GL_NV_gpu_shader5")),
    (CapabilityFlags.INT8, ("GL_EXT_shader_explicit_arithmetic_types_int8", "GL_NV_gpu_shader5")),
    (CapabilityFlags.SUBGROUPS, ("GL_KHR_shader_subgroup", "GL_ARB_shader_ballot")),
)
#: Limits copied into extras, under lower-case names without the GL_ prefix.
_LIMITS = (
    "GL_MAX_COMPUTE_WORK_GROUP_COUNT",
    "GL_MAX_COMPUTE_WORK_GROUP_SIZE",
    "GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS",
    "GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS",
    "GL_MAX_COMPUTE_UNIFORM_BLOCKS",
    "GL_MAX_SHADER_STORAGE_BLOCK_SIZE",
    "GL_MAX_SHADER_STORAGE_BUFFER_BINDINGS",
    "GL_MAX_UNIFORM_BLOCK_SIZE",
)


def vendor_of(gl_vendor: str, renderer: str) -> Vendor:
    """Who makes the device: the renderer first (llvmpipe is Mesa whatever GL_VENDOR says), then GL_VENDOR."""
    for text in (renderer.lower(), gl_vendor.lower()):
        for word, vendor in _VENDOR_WORDS:
            if re.search(rf"\b{word}\b", text):
                return vendor
    return Vendor.UNKNOWN


def describe(ctx: Any, calls: GLCalls | None, ordinal: int = 0) -> DeviceDescriptor:
    """The descriptor of the device behind `ctx`."""
    info = ctx.info
    gl_vendor, renderer, version = (str(info.get(k, "")) for k in ("GL_VENDOR", "GL_RENDERER", "GL_VERSION"))
    extensions = set(ctx.extensions)
    software = bool(_SOFTWARE.search(renderer))
    kind = DeviceKind.CPU if software else DeviceKind.GPU
    if software:
        tier = ComputeTier.SOFTWARE
    elif _DATACENTER.search(renderer):
        tier = ComputeTier.DATACENTER
    elif _WORKSTATION.search(renderer):
        tier = ComputeTier.WORKSTATION
    else:
        tier = ComputeTier.CONSUMER
    caps = CapabilityFlags.RUNTIME_COMPILE
    for flag, names in _FLAG_EXTENSIONS:
        if any(n in extensions for n in names):
            caps |= flag
    if calls is not None and calls.available and timestamp_bits(calls) > 0:  # GL_TIMESTAMP queries tick here
        caps |= CapabilityFlags.TIMESTAMPS
    if ctx.version_code >= 400:  # double precision is core from OpenGL 4.0
        caps |= CapabilityFlags.FP64
    memory, memory_source = 0, None  # core GL has no memory query; NVIDIA's extension does
    if calls is not None and calls.available and "GL_NVX_gpu_memory_info" in extensions:
        memory = calls.integer(GLCalls.GL_GPU_MEMORY_INFO_TOTAL_AVAILABLE_MEMORY_NVX) * 1024
        memory_source = "GL_NVX_gpu_memory_info"
    extras: dict[str, Any] = {
        "gl_vendor": gl_vendor,
        "gl_renderer": renderer,
        "gl_version": version,
        "version_code": int(ctx.version_code),
        "memory_source": memory_source,
    }
    for name in _LIMITS:
        value = info.get(name)
        if value is not None:
            extras[name[3:].lower()] = list(value) if isinstance(value, tuple) else int(value)
    return DeviceDescriptor(
        backend=BACKEND,
        ordinal=ordinal,
        name=renderer or "OpenGL device",
        vendor=vendor_of(gl_vendor, renderer),
        kind=kind,
        memory_bytes=memory,
        compute_tier=tier,
        capabilities=caps,
        extras=extras,
    )
