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
from ironaccel.compute.params import ConstantInfo, wgsl_overrides, wgsl_params
from ironaccel.errors import InvalidArgument
from ironaccel.types import DType

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

    def __init__(self, device: WebGPUDevice, code: str, entry: str, buffers: int, params: int | None,
                 constants: dict[str | int, Any] | None = None):
        wgpu = device.wgpu
        gpu = device.gpu
        overrides = wgsl_overrides(code)
        pipeline_constants = override_values(overrides, constants or {})
        try:
            module = gpu.create_shader_module(code=code)
        except Exception as exc:  # wgpu raises GPUValidationError with naga's message
            raise compile_error(exc, "wgpuDeviceCreateShaderModule") from None
        # The uniform block of group 0, read from the code: params go by name in its layout ("wgsl-uniform")
        # where the caller asked for the code's params (None) or as many as it has fields.
        found = wgsl_params(code)
        block = found[1] if found is not None and (params is None or params == len(found[1].fields)) else None
        if block is not None:
            params = len(block.fields)
        params = params or 0
        interface = Interface.of(buffers, wgsl_interface(code), block, overrides)
        stage = wgpu.ShaderStage.COMPUTE
        entries = [
            {"binding": i, "visibility": stage,
             "buffer": {"type": "storage" if interface.writable[i] else "read-only-storage"}}
            for i in range(buffers)
        ]
        self.uniform: Any = None
        self.uniform_size = 0
        #: The uniform's binding: the code's where its block was read, else right after the storage buffers.
        self.uniform_binding = found[0] if block is not None and found is not None else buffers
        if params:
            size = block.size if block is not None else params * 4
            self.uniform_size = -(-size // UNIFORM_ALIGN) * UNIFORM_ALIGN
            entries.append({"binding": self.uniform_binding, "visibility": stage, "buffer": {"type": "uniform"}})
        try:
            self.layout = gpu.create_bind_group_layout(entries=entries)
            pipeline_layout = gpu.create_pipeline_layout(bind_group_layouts=[self.layout])
        except Exception as exc:  # e.g. more storage buffers than the device allows
            raise translate(exc, "wgpuDeviceCreateBindGroupLayout") from None
        try:
            self.pipeline = gpu.create_compute_pipeline(
                layout=pipeline_layout,
                compute={"module": module, "entry_point": entry, "constants": pipeline_constants})
        except Exception as exc:
            message = str(exc)
            if "pipeline layout" in message or "binding" in message.lower():
                raise InvalidArgument(
                    BACKEND, "wgpuDeviceCreateComputePipeline",
                    detail=f"the shader's bindings do not match buffers={buffers}, params={params} "
                    f"(storage buffers at @group(0) @binding(0..{buffers - 1})"
                    + (f", a uniform at @binding({self.uniform_binding})" if params else "") + f"): {message.strip()}",
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
        group = self.make_bind_group(device, buffers, self.uniform, 0)
        self.bind_groups[key] = group
        self.last_buffers, self.last_group = buffers, group
        for buf in buffers:
            buf.bind_keys.append((self, key))
        if len(self.bind_groups) > MAX_BIND_GROUPS:
            self.bind_groups.popitem(last=False)
        return group

    def make_bind_group(self, device: WebGPUDevice, buffers: list[Storage], uniform: Any, offset: int) -> Any:
        """A new bind group of these storage buffers and the params at `offset` of `uniform` (a batch's own)."""
        limit = device.max_binding_bytes
        for index, buf in enumerate(buffers):
            if buf.padded_nbytes > limit:
                raise InvalidArgument(BACKEND, "dispatch", detail=f"buffer {index} holds {buf.nbytes} bytes, over "
                                      f"the device's max-storage-buffer-binding-size {limit}")
        entries = [{"binding": i, "resource": {"buffer": b.gpu, "offset": 0, "size": b.padded_nbytes}}
                   for i, b in enumerate(buffers)]
        if self.uniform_size:
            entries.append({"binding": self.uniform_binding,
                            "resource": {"buffer": uniform, "offset": offset, "size": self.uniform_size}})
        try:
            return device.gpu.create_bind_group(layout=self.layout, entries=entries)
        except Exception as exc:  # e.g. one buffer bound read-only and read-write at once
            raise translate(exc, "wgpuDeviceCreateBindGroup") from None

    def release(self) -> None:
        super().release()
        self.bind_groups.clear()
        self.last_buffers = self.last_group = None
        if self.uniform is not None:
            self.uniform.destroy()
            self.uniform = None
        self.pipeline = None


def override_values(overrides: tuple[ConstantInfo, ...], constants: dict[str | int, Any]) -> dict[str, Any]:
    """The pipeline constants wgpu takes (keyed by @id where the override has one, else by name), each checked
    against the code's `override` declarations: a known name or id, and a value of its type."""
    found: dict[str, Any] = {}
    for key, value in constants.items():
        info = next((o for o in overrides if o.name == key or (isinstance(key, int) and o.id == key)), None)
        if info is None:
            raise InvalidArgument(BACKEND, "pipeline", detail=f"the code declares no override {key!r} (it has "
                                  f"{', '.join(o.name for o in overrides) or 'none'})")
        kind = info.dtype
        if kind is DType.BOOL:
            good = isinstance(value, bool)
        elif kind in (DType.FLOAT32, DType.FLOAT16):
            good = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif kind in (DType.INT32, DType.UINT32):
            low, high = (0, 2**32 - 1) if kind is DType.UINT32 else (-(2**31), 2**31 - 1)
            good = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
        else:
            good = True  # a type the reader does not know: wgpu checks it
        if not good:
            raise InvalidArgument(BACKEND, "pipeline", detail=f"override {info.name!r} is "
                                  f"{kind.value if kind else 'of unknown type'}, got {value!r}")
        found[str(info.id) if info.id is not None else info.name] = value
    return found


class WebGPUPipeline(PipelineHandle):
    """A handle on a compiled WebGPUProgram; closing it leaves the program cached for the next identical request."""

    __slots__ = ()

