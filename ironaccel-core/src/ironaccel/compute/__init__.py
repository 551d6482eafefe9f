"""The compute kit: what every ComputeDevice shares, for first-party and third-party backends alike.

* `ComputeDeviceBase` (`base`): the whole ComputeDevice protocol over a
  backend's vendor calls; the rules it enforces are written in
  `ironaccel.protocols.ComputeDevice` and checked by
  `ironaccel.testing.conformance.ComputeDeviceConformance`.
* `BufferHandle`, `PipelineHandle`, `Program`, `ProgramCache`, `Submission`,
  `wait_for` (`handles`): handles, their lifetimes, the program cache, waiting.
* The execution model (`execution`, plugin contract 1.2): `Queue`, `Fence`,
  `CommandBatch` and `Command`, `Timings`, `ExternalMemory` and
  `ExternalFence`, the `FEATURES` a device may declare and the `MEMORY_KINDS`.
* Typed parameters (`params`): a pipeline's reflected `ParamBlock` of `Field`s
  typed `Scalar`, `Vector`, `Array` or `Struct`, its layout rules and the one
  packing rule; `ConstantInfo` for specialization constants.
* The argument checks and params packing (`checks`), shader text and the
  storage-buffer interfaces of WGSL and GLSL (`shaders`, with `Interface`,
  what `pipeline.interface` returns), fork detection and the runtime directory
  (`process`): usable on their own by a backend whose device cannot subclass
  the base (CUDA's `Device` is also the full CUDA API).
* Source objects (`sources`, with `Translation`): kernel source in a language
  no device compiles itself (Slang), translated per device by its package.
"""

from __future__ import annotations

from .base import ComputeDeviceBase, flat_bytes
from .checks import (
    buffer_list,
    check_out,
    count,
    element_count,
    element_type,
    entry_name,
    host_array,
    numpy_dtype,
    pack_params,
    timeout_seconds,
    workgroup_size,
    workgroups,
)
from .execution import (
    FEATURES,
    MEMORY_KINDS,
    Command,
    CommandBatch,
    ExternalFence,
    ExternalMemory,
    Fence,
    Queue,
    Timings,
    close_duplicate,
)
from .handles import WAIT_SLICE, BufferHandle, PipelineHandle, Program, ProgramCache, Submission, evict_unused, wait_for
from .params import Array, ConstantInfo, Field, ParamBlock, Scalar, Struct, Vector
from .process import ensure_runtime_dir, fork_error, generation
from .shaders import (
    BindingInfo,
    Interface,
    StorageBinding,
    check_bindings,
    glsl_interface,
    source_text,
    wgsl_interface,
)
from .sources import Translation

__all__ = [
    "ComputeDeviceBase", "flat_bytes",
    "BufferHandle", "PipelineHandle", "Program", "ProgramCache", "Submission", "wait_for", "evict_unused",
    "WAIT_SLICE",
    "buffer_list", "check_out", "count", "element_count", "element_type", "entry_name", "host_array",
    "numpy_dtype", "pack_params", "timeout_seconds", "workgroup_size", "workgroups",
    "Interface", "BindingInfo", "StorageBinding", "check_bindings", "glsl_interface", "source_text", "wgsl_interface",
    "FEATURES", "MEMORY_KINDS", "Queue", "Fence", "CommandBatch", "Command", "Timings", "ExternalMemory",
    "ExternalFence", "close_duplicate",
    "ParamBlock", "Field", "Scalar", "Vector", "Array", "Struct", "ConstantInfo",
    "ensure_runtime_dir", "fork_error", "generation",
    "Translation",
]
