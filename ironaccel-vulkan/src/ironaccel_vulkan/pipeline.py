"""Compute pipelines from SPIR-V: checked against the device, built once, cached.

`build_pipeline` reflects the module (spirv.py), checks it against the call
(buffer count, push-constant size, set 0) and the device's limits, then
creates the shader module, descriptor-set layout (N storage buffers), pipeline
layout (one push-constant range of 4 bytes per param) and the pipeline,
through the device's VkPipelineCache.  Identical requests share one
`PipelineState`; each caller gets its own `VulkanPipeline` handle, and the
state is destroyed when the last handle closes and its last dispatch finishes.
"""

from __future__ import annotations

import hashlib
import itertools
import weakref
from typing import TYPE_CHECKING, Any

from ironaccel.errors import ClosedError, CompileError, InvalidArgument

from . import results, spirv
from .binding import BACKEND

if TYPE_CHECKING:
    from .core import DeviceCore

__all__ = ["PipelineState", "VulkanPipeline", "build_pipeline"]

STAGE_COMPUTE = 0x20
VK_DESCRIPTOR_TYPE_STORAGE_BUFFER = 7
_ids = itertools.count(1)


class PipelineState:
    """The Vulkan objects of one pipeline, shared by every handle that asked for the same code."""

    def __init__(self, key: Any, entry: str, buffers: int, params: int, info: spirv.ModuleInfo):
        self.id = -next(_ids)  # negative: never collides with allocation ids in the dispatch-cache index
        self.key = key
        self.entry = entry
        self.buffers = buffers
        self.params = params
        self.info = info
        self.module: Any = None
        self.set_layout: Any = None
        self.layout: Any = None
        self.pipeline: Any = None
        self.refs = 0
        self.last_serial = 0
        self.dead = False

    def release_from(self, core: DeviceCore) -> None:
        """Drop one handle's reference; the last one destroys the state after its last dispatch."""
        with core.lock:
            if self.dead or core.closed:
                return
            self.refs -= 1
            if self.refs > 0:
                return
            self.dead = True
            core.pipelines.pop(self.key, None)
            core.forget_bindings(self.id)
            core.timeline.defer(self.last_serial, lambda: self.destroy(core))

    def destroy(self, core: DeviceCore) -> None:
        ffi, lib, device = core.ffi, core.lib, core.handle
        if self.pipeline is not None:
            lib.vkDestroyPipeline(device, self.pipeline, ffi.NULL)
        if self.layout is not None:
            lib.vkDestroyPipelineLayout(device, self.layout, ffi.NULL)
        if self.set_layout is not None:
            lib.vkDestroyDescriptorSetLayout(device, self.set_layout, ffi.NULL)
        if self.module is not None:
            lib.vkDestroyShaderModule(device, self.module, ffi.NULL)
        self.pipeline = self.layout = self.set_layout = self.module = None
        self.dead = True


class VulkanPipeline:
    """A Pipeline handle: `entry`, `buffers` and `params` of a compiled SPIR-V compute shader."""

    __slots__ = ("entry", "buffers", "params", "local_size", "_state", "_core", "_finalizer", "__weakref__")

    def __init__(self, core: DeviceCore, state: PipelineState):
        self.entry = state.entry
        self.buffers = state.buffers
        self.params = state.params
        ep = state.info.entry_points[state.entry]
        self.local_size = ep.local_size
        self._state = state
        self._core = core
        state.refs += 1
        self._finalizer = weakref.finalize(self, core.release_later, state)

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive or self._state.dead

    def close(self) -> None:
        """Release this handle; a second call is a no-op."""
        if self._finalizer.detach() is not None:
            self._state.release_from(self._core)

    def __repr__(self) -> str:
        return f"<VulkanPipeline {self.entry!r} buffers={self.buffers} params={self.params}>"


def pipeline_state(core: DeviceCore, pipeline: Any, op: str) -> PipelineState:
    """The state behind a pipeline handle, checked to be open and of this device."""
    if not isinstance(pipeline, VulkanPipeline) or pipeline._core is not core:
        what = "a pipeline of another device" if isinstance(pipeline, VulkanPipeline) else type(pipeline).__name__
        raise InvalidArgument(BACKEND, op, detail=f"expected a pipeline of this device, got {what}")
    if pipeline.closed:
        raise ClosedError(BACKEND, op, "pipeline")
    return pipeline._state


def _check_interface(core: DeviceCore, info: spirv.ModuleInfo, entry: str, buffers: int, params: int) -> None:
    op = "vkCreateComputePipelines"
    limits = core.limits
    ep = info.entry_points.get(entry)
    if ep is None or ep.model != spirv.MODEL_GLCOMPUTE:
        found = ", ".join(f"{e.name!r} ({spirv.MODELS.get(e.model, e.model)})" for e in info.entry_points.values())
        raise CompileError(BACKEND, op, log=f"no GLCompute entry point named {entry!r} in the module; "
                           f"it has: {found or 'no entry points'}")
    if ep.local_size is not None:
        x, y, z = ep.local_size
        max_size, max_invocations = limits["max_workgroup_size"], limits["max_workgroup_invocations"]
        if x * y * z > max_invocations or any(d > m for d, m in zip(ep.local_size, max_size)):
            raise CompileError(BACKEND, op, log=f"local size {ep.local_size} exceeds this device's limits: "
                               f"maxComputeWorkGroupSize {tuple(max_size)}, "
                               f"maxComputeWorkGroupInvocations {max_invocations}")
    for b in info.bindings:
        if b.set != 0:
            raise InvalidArgument(BACKEND, op, detail=f"the code uses descriptor set {b.set}; "
                                  "a ComputeDevice binds its buffers in set 0")
        if b.binding >= buffers:
            raise InvalidArgument(BACKEND, op, detail=f"the code uses binding {b.binding} but the pipeline "
                                  f"declares buffers={buffers} (bindings 0..{buffers - 1})")
        if b.kind != "storage":
            raise InvalidArgument(BACKEND, op, detail=f"binding {b.binding} is a {b.kind} resource; a ComputeDevice "
                                  "binds storage buffers only (declare it as `buffer`, not `uniform`)")
    if info.uses_push_constants and params == 0:
        raise InvalidArgument(BACKEND, op, detail="the code declares push constants but the pipeline declares params=0")
    if info.push_constant_bytes is not None and info.push_constant_bytes > 4 * params:
        raise InvalidArgument(BACKEND, op, detail=f"the code reads {info.push_constant_bytes} bytes of push constants; "
                              f"params={params} gives {4 * params}")


def build_pipeline(core: DeviceCore, code: Any, entry: str, buffers: int, params: int) -> PipelineState:
    """The cached or newly built state for this code and interface; typed errors for every bad input."""
    op = "pipeline"
    for name, value in (("buffers", buffers), ("params", params)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgument(BACKEND, op, detail=f"{name} must be a non-negative int, got {value!r}")
    if buffers > core.limits["max_storage_buffers_per_stage"]:
        raise InvalidArgument(BACKEND, op, detail=f"buffers={buffers} exceeds maxPerStageDescriptorStorageBuffers "
                              f"{core.limits['max_storage_buffers_per_stage']}")
    if 4 * params > core.limits["max_push_constants_bytes"]:
        raise InvalidArgument(BACKEND, op, detail=f"params={params} needs {4 * params} bytes of push constants; "
                              f"this device allows {core.limits['max_push_constants_bytes']}")
    if not isinstance(entry, str) or not entry:
        raise InvalidArgument(BACKEND, op, detail=f"entry must be a non-empty str, got {entry!r}")
    words = spirv.to_words(code, op)
    key = (hashlib.blake2b(words.tobytes(), digest_size=16).digest(), entry, buffers, params)
    cached = core.pipelines.get(key)
    if cached is not None:
        return cached
    info = spirv.reflect(words, op)
    _check_interface(core, info, entry, buffers, params)
    state = PipelineState(key, entry, buffers, params, info)
    try:
        _create(core, state, words)
    except BaseException:
        state.destroy(core)
        raise
    core.pipelines[key] = state
    core.stats["pipelines_created"] += 1
    return state


def _create(core: DeviceCore, state: PipelineState, words: Any) -> None:
    ffi, lib, device = core.ffi, core.lib, core.handle
    log = core.instance.log
    mark = log.mark()

    def failed(call: str, result: int) -> CompileError:
        messages = "\n".join(str(m) for m in log.since(mark))
        name = results.result_name(result)
        text = messages or (f"{call} returned {name} ({result}) without a message; run with "
                            "IRONACCEL_VULKAN_VALIDATION=1 for the validation layer's diagnosis")
        return CompileError(BACKEND, call, log=text, code=result, code_name=name)

    code = ffi.from_buffer("uint32_t[]", words)
    module_info = ffi.new("VkShaderModuleCreateInfo*", {"sType": 16, "codeSize": words.nbytes, "pCode": code})
    out = ffi.new("VkShaderModule*")
    result = lib.vkCreateShaderModule(device, module_info, ffi.NULL, out)
    if result:
        raise failed("vkCreateShaderModule", result)
    state.module = out[0]
    if any(m.is_error for m in log.since(mark)):  # the layer rejected the module but let the call through
        raise failed("vkCreateShaderModule", results.VK_ERROR_VALIDATION_FAILED_EXT)

    bindings = ffi.new("VkDescriptorSetLayoutBinding[]", [
        {"binding": i, "descriptorType": VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "descriptorCount": 1,
         "stageFlags": STAGE_COMPUTE} for i in range(state.buffers)
    ] or 1)
    set_info = ffi.new("VkDescriptorSetLayoutCreateInfo*", {
        "sType": 32, "bindingCount": state.buffers, "pBindings": bindings if state.buffers else ffi.NULL})
    out_set = ffi.new("VkDescriptorSetLayout*")
    results.check("vkCreateDescriptorSetLayout", lib.vkCreateDescriptorSetLayout(device, set_info, ffi.NULL, out_set))
    state.set_layout = out_set[0]

    set_layouts = ffi.new("VkDescriptorSetLayout[1]", [state.set_layout])
    push_range = ffi.new("VkPushConstantRange*", {"stageFlags": STAGE_COMPUTE, "offset": 0, "size": 4 * state.params})
    layout_info = ffi.new("VkPipelineLayoutCreateInfo*", {
        "sType": 30, "setLayoutCount": 1, "pSetLayouts": set_layouts,
        "pushConstantRangeCount": 1 if state.params else 0, "pPushConstantRanges": push_range if state.params
        else ffi.NULL})
    out_layout = ffi.new("VkPipelineLayout*")
    results.check("vkCreatePipelineLayout", lib.vkCreatePipelineLayout(device, layout_info, ffi.NULL, out_layout))
    state.layout = out_layout[0]

    name = ffi.new("char[]", state.entry.encode())
    pipeline_info = ffi.new("VkComputePipelineCreateInfo*", {
        "sType": 29,
        "stage": {"sType": 18, "stage": STAGE_COMPUTE, "module": state.module, "pName": name},
        "layout": state.layout,
        "basePipelineIndex": -1,
    })
    out_pipeline = ffi.new("VkPipeline*")
    result = lib.vkCreateComputePipelines(device, core.pipeline_cache, 1, pipeline_info, ffi.NULL, out_pipeline)
    if result:
        raise failed("vkCreateComputePipelines", result)
    state.pipeline = out_pipeline[0]
    if any(m.is_error for m in log.since(mark)):  # the validation layer objected but let the call through
        raise failed("vkCreateComputePipelines", results.VK_ERROR_VALIDATION_FAILED_EXT)
