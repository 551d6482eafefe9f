"""Compute pipelines from WGSL: an explicit bind-group layout, cached programs, cached bind groups.

The layout is explicit (not "auto", which drops bindings the shader does not
use): storage buffers at bindings 0..buffers-1 of group 0 and, when the
pipeline takes params, a uniform buffer at binding `buffers`.  WebGPU requires
a storage binding's access in the layout to match the shader's, so the WGSL
declarations of group 0 are read (`ironaccel.compute.wgsl_interface`) for
`var<storage, read>` versus `read_write`, and for the element types dispatch
checks.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from ironaccel.compute import Interface, PipelineHandle, Program, wgsl_interface
from ironaccel.errors import InvalidArgument

from .errors import compile_error, translate

if TYPE_CHECKING:
    from .device import WebGPUDevice
    from .memory import Storage

BACKEND = "webgpu"
UNIFORM_ALIGN = 16
#: Bind groups kept per program; the oldest is dropped beyond this.
MAX_BIND_GROUPS = 64


class WebGPUProgram(Program):
    """What one compile produced, shared by every pipeline handle with the same key."""

    def __init__(self, device: WebGPUDevice, code: str, entry: str, buffers: int, params: int):
        wgpu = device.wgpu
        gpu = device.gpu
        try:
            module = gpu.create_shader_module(code=code)
        except Exception as exc:  # wgpu raises GPUValidationError with naga's message
            raise compile_error(exc, "wgpuDeviceCreateShaderModule") from None
        interface = Interface.of(buffers, wgsl_interface(code))
        stage = wgpu.ShaderStage.COMPUTE
        entries = [
            {"binding": i, "visibility": stage,
             "buffer": {"type": "storage" if interface.writable[i] else "read-only-storage"}}
            for i in range(buffers)
        ]
        self.uniform: Any = None
        self.uniform_size = 0
        if params:
            self.uniform_size = -(-params * 4 // UNIFORM_ALIGN) * UNIFORM_ALIGN
            entries.append({"binding": buffers, "visibility": stage, "buffer": {"type": "uniform"}})
        try:
            self.layout = gpu.create_bind_group_layout(entries=entries)
            pipeline_layout = gpu.create_pipeline_layout(bind_group_layouts=[self.layout])
        except Exception as exc:  # e.g. more storage buffers than the device allows
            raise translate(exc, "wgpuDeviceCreateBindGroupLayout") from None
        try:
            self.pipeline = gpu.create_compute_pipeline(
                layout=pipeline_layout, compute={"module": module, "entry_point": entry})
        except Exception as exc:
            message = str(exc)
            if "pipeline layout" in message or "binding" in message.lower():
                raise InvalidArgument(
                    BACKEND, "wgpuDeviceCreateComputePipeline",
                    detail=f"the shader's bindings do not match buffers={buffers}, params={params} "
                    f"(storage buffers at @group(0) @binding(0..{buffers - 1})"
                    + (f", a uniform at @binding({buffers})" if params else "") + f"): {message.strip()}",
                ) from None
            raise compile_error(exc, "wgpuDeviceCreateComputePipeline") from None
        if params:
            try:
                self.uniform = gpu.create_buffer(
                    size=self.uniform_size, usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
            except Exception as exc:
                raise translate(exc, "wgpuDeviceCreateBuffer") from None
        super().__init__(buffers, params, interface)
        self.last_params: bytes | None = None  # what the uniform buffer holds, in queue order
        self.bind_groups: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        #: The vendor-handle list of the last dispatch (the kit passes the same list object while its buffers
        #: are unchanged: ComputeDeviceBase.dispatch) and its bind group.
        self.last_buffers: list[Storage] | None = None
        self.last_group: Any = None

    def bind_group(self, device: WebGPUDevice, buffers: list[Storage]) -> Any:
        """The bind group for these buffers, built once and reused."""
        if buffers is self.last_buffers:  # the kit's list of the last dispatch's buffers, unchanged since
            return self.last_group
        key = tuple([b.serial for b in buffers])
        group = self.bind_groups.get(key)
        if group is not None:
            self.last_buffers, self.last_group = buffers, group
            return group
        limit = device.max_binding_bytes
        for index, buf in enumerate(buffers):
            if buf.padded_nbytes > limit:
                raise InvalidArgument(BACKEND, "dispatch", detail=f"buffer {index} holds {buf.nbytes} bytes, over "
                                      f"the device's max-storage-buffer-binding-size {limit}")
        entries = [{"binding": i, "resource": {"buffer": b.gpu, "offset": 0, "size": b.padded_nbytes}}
                   for i, b in enumerate(buffers)]
        if self.uniform is not None:
            entries.append({"binding": len(buffers),
                            "resource": {"buffer": self.uniform, "offset": 0, "size": self.uniform_size}})
        try:
            group = device.gpu.create_bind_group(layout=self.layout, entries=entries)
        except Exception as exc:  # e.g. one buffer bound read-only and read-write at once
            raise translate(exc, "wgpuDeviceCreateBindGroup") from None
        self.bind_groups[key] = group
        self.last_buffers, self.last_group = buffers, group
        for buf in buffers:
            buf.bind_keys.append((self, key))
        if len(self.bind_groups) > MAX_BIND_GROUPS:
            self.bind_groups.popitem(last=False)
        return group

    def release(self) -> None:
        super().release()
        self.bind_groups.clear()
        self.last_buffers = self.last_group = None
        if self.uniform is not None:
            self.uniform.destroy()
            self.uniform = None
        self.pipeline = None


class WebGPUPipeline(PipelineHandle):
    """A handle on a compiled WebGPUProgram; closing it leaves the program cached for the next identical request."""

    __slots__ = ()

