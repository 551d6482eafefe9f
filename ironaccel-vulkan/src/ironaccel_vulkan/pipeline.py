"""Compute pipelines from SPIR-V: checked against the device and validated, then built once and cached.

`build` reflects the module (spirv.py), checks it against the call (buffer
count, push-constant size, set 0) and the device's limits, has SPIRV-Tools
validate it (spirv_val.py), then creates the shader module, descriptor-set
layout (N storage buffers), pipeline layout (one push-constant range of 4
bytes per param) and the pipeline, through the device's VkPipelineCache.
Identical requests share one `PipelineState`, kept in the compute kit's
program cache; each caller gets its own `VulkanPipeline` handle, and a state
is destroyed once the cache lets it go and its last dispatch has finished.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from ironaccel.compute import Interface, PipelineHandle, Program
from ironaccel.errors import CompileError, InvalidArgument

from . import results, spirv, spirv_val
from .binding import BACKEND

if TYPE_CHECKING:
    from .state import DeviceState

__all__ = ["PipelineState", "VulkanPipeline", "prepare", "build"]

STAGE_COMPUTE = 0x20
VK_DESCRIPTOR_TYPE_STORAGE_BUFFER = 7
_ids = itertools.count(1)


class PipelineState(Program):
    """The Vulkan objects of one pipeline, shared by every handle that asked for the same code."""

    def __init__(self, state: DeviceState, entry: str, buffers: int, params: int, info: spirv.ModuleInfo,
                 specialization: list[tuple[int, bytes]] | None = None):
        storage = [b.storage() for b in info.bindings if b.set == 0 and b.kind == "storage"]
        super().__init__(buffers, params, Interface.of(buffers, storage, info.push_block, info.constants))
        self.specialization = specialization or []
        #: Bytes of the push-constant range: the reflected block's size where dispatches pack by it.
        self.push_bytes = max(4 * params, info.push_block.size if info.push_block is not None
                              and len(info.push_block.fields) == params else 0)
        self.id = -next(_ids)  # negative: never collides with allocation ids in the dispatch-cache index
        self.entry = entry
        self.info = info
        self.module: Any = None
        self.set_layout: Any = None
        self.layout: Any = None
        self.pipeline: Any = None
        self.last_serial = 0
        self.elsewhere: dict[Any, int] = {}  # further queues' Timelines -> the serial of the last use there
        self._state = state
        state.pipelines[self.id] = self

    def release(self) -> None:
        """Leave the cache: destroyed once its last dispatch has finished (at once if the device is closing)."""
        if self.released:
            return
        super().release()
        state = self._state
        state.pipelines.pop(self.id, None)
        if state.closed:
            return
        state.forget_bindings(self.id)
        state.after(self, lambda: self.destroy(state))

    def destroy(self, state: DeviceState) -> None:
        ffi, lib, device = state.ffi, state.lib, state.handle
        if device is not None:
            if self.pipeline is not None:
                lib.vkDestroyPipeline(device, self.pipeline, ffi.NULL)
            if self.layout is not None:
                lib.vkDestroyPipelineLayout(device, self.layout, ffi.NULL)
            if self.set_layout is not None:
                lib.vkDestroyDescriptorSetLayout(device, self.set_layout, ffi.NULL)
            if self.module is not None:
                lib.vkDestroyShaderModule(device, self.module, ffi.NULL)
        self.pipeline = self.layout = self.set_layout = self.module = None
        self.released = True


class VulkanPipeline(PipelineHandle):
    """A Pipeline handle: `entry`, `buffers` and `params` of a compiled SPIR-V compute shader, its `local_size`."""

    __slots__ = ("local_size",)

    def __init__(self, device: Any, program: PipelineState, entry: str, workgroup_size: tuple[int, int, int]):
        super().__init__(device, program, entry, workgroup_size)
        self.local_size = program.info.entry_points[entry].local_size


def prepare(code: Any, op: str = "pipeline") -> tuple[np.ndarray, bytes]:
    """The module's words and the program-cache key they give (a hash: a module may be large)."""
    words = spirv.to_words(code, op)
    return words, hashlib.blake2b(words.tobytes(), digest_size=16).digest()


def _check_interface(core: DeviceState, info: spirv.ModuleInfo, entry: str, buffers: int, params: int) -> None:
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
    typed = info.push_block is not None and len(info.push_block.fields) == params
    if not typed and info.push_constant_bytes is not None and info.push_constant_bytes > 4 * params:
        raise InvalidArgument(BACKEND, op, detail=f"the code reads {info.push_constant_bytes} bytes of push constants; "
                              f"params={params} gives {4 * params}")


def build(state: DeviceState, words: np.ndarray, entry: str, buffers: int, params: int,
          constants: dict[Any, Any] | None = None) -> PipelineState:
    """A new state for this module and interface; typed errors for every bad input, before the driver sees it."""
    op = "pipeline"
    info = spirv.reflect(words, op)
    push = info.push_block.size if info.push_block is not None and len(info.push_block.fields) == params else 0
    if max(4 * params, push) > state.limits["max_push_constants_bytes"]:
        raise InvalidArgument(BACKEND, op, detail=f"params={params} needs {4 * params} bytes of push constants; "
                              f"this device allows {state.limits['max_push_constants_bytes']}")
    _check_interface(state, info, entry, buffers, params)
    spirv_val.validate(words, spirv_val.target_for(state.api_version, state.enabled_features), op)
    specialization = spirv.pack_constants(info, constants or {}, op)
    pipeline = PipelineState(state, entry, buffers, params, info, specialization)
    try:
        _create(state, pipeline, words)
    except BaseException:
        pipeline.destroy(state)
        state.pipelines.pop(pipeline.id, None)
        raise
    state.stats["pipelines_created"] += 1
    return pipeline


def _create(core: DeviceState, state: PipelineState, words: Any) -> None:
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
    push_range = ffi.new("VkPushConstantRange*", {"stageFlags": STAGE_COMPUTE, "offset": 0, "size": state.push_bytes})
    layout_info = ffi.new("VkPipelineLayoutCreateInfo*", {
        "sType": 30, "setLayoutCount": 1, "pSetLayouts": set_layouts,
        "pushConstantRangeCount": 1 if state.params else 0, "pPushConstantRanges": push_range if state.params
        else ffi.NULL})
    out_layout = ffi.new("VkPipelineLayout*")
    results.check("vkCreatePipelineLayout", lib.vkCreatePipelineLayout(device, layout_info, ffi.NULL, out_layout))
    state.layout = out_layout[0]

    name = ffi.new("char[]", state.entry.encode())
    special: Any = ffi.NULL
    if state.specialization:
        data = b"".join(raw for _, raw in state.specialization)
        entries, offset = [], 0
        for spec_id, raw in state.specialization:
            entries.append({"constantID": spec_id, "offset": offset, "size": len(raw)})
            offset += len(raw)
        map_entries = ffi.new("VkSpecializationMapEntry[]", entries)
        blob = ffi.new("char[]", data)
        special = ffi.new("VkSpecializationInfo*", {"mapEntryCount": len(entries), "pMapEntries": map_entries,
                                                    "dataSize": len(data), "pData": blob})
    pipeline_info = ffi.new("VkComputePipelineCreateInfo*", {
        "sType": 29,
        "stage": {"sType": 18, "stage": STAGE_COMPUTE, "module": state.module, "pName": name,
                  "pSpecializationInfo": special},
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
