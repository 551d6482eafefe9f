"""PyCUDA's driver-level API on ironaccel_cuda: installs from wheels, needs no CUDA toolkit.

    from ironaccel_cuda_compat import pycuda
    pycuda.install()                      # from now on `import pycuda...` is this package
    import pycuda.autoinit, pycuda.driver as drv
    from pycuda.compiler import SourceModule

Submodules: `driver` (with `_driver`), `compiler` (NVRTC; nvcc is never
run), `tools`, `autoinit`, `autoprimaryctx`, and `gpuarray` with its vector
types only.  PyCUDA's semantics are kept where code depends on them: its own
per-thread context stack (driver-created contexts, `push`/`pop`/`detach`),
every object released in the context it was made in, argument packing by
Python type and by struct format, the error classes and their mapping from
CUDA result codes (each also an ironaccel typed error), the enums.  The hot
calls -- `mem_alloc`/`free`, `memcpy_*`, `memset_*`, kernel launches,
`Stream.synchronize`, `Event.record`/`synchronize` -- go straight to
ironaccel's compiled hot path (`_fast`); everything else is a cold
`cuda.bindings` call.

Coverage: every public driver-level name of PyCUDA 2026.1, what it is here
(same / differs / missing) and what differs.

  pycuda.driver
  init, get_driver_version .................... same (CUDA initialises on first use anyway)
  get_version ................................. differs: the CUDA version cuda.bindings is built for
                                                (PyCUDA: the toolkit it was compiled against)
  Error, MemoryError, LogicError, LaunchError,
  RuntimeError, CompileError .................. same classes, same code mapping, same text; each raised
                                                error is also ironaccel's (OutOfMemory, InvalidArgument,
                                                InvalidState, ...) with op/code/code_name; input PyCUDA
                                                refuses with TypeError/ValueError is a LogicError that is
                                                also that built-in; CompileError carries NVRTC's log
  ctx_flags, event_flags, stream_flags,
  device_attribute, function_attribute,
  pointer_attribute, memory_type, compute_mode,
  limit, func_cache, shared_config, jit_option,
  jit_target, jit_fallback, jit_input_type,
  array_format, address_mode, filter_mode,
  mem_attach_flags, ipc_mem_flags,
  graphics_register_flags, array_cubemap_face,
  profiler_output_mode, host_alloc_flags,
  mem_host_register_flags, array3d_flags,
  TRSA_*/TRSF_*/TR_DEFAULT .................... same (IntEnums from cuda.bindings: every value it knows)
  Device: count, name, pci_bus_id,
  compute_capability, total_memory,
  get_attribute(s), attributes by name,
  make_context, retain_primary_context,
  can_access_peer, ==, hash ................... same; get_attributes skips attributes this driver does
                                                not know instead of warning about them
  Context: push, pop, detach, attach,
  get_current, get_device, synchronize,
  get/set_limit, get/set_cache_config,
  get/set_shared_config, enable/disable_peer_
  access, get_api_version, handle, ==, hash ... same; objects owned by a context are also released
                                                when collected on another thread (PyCUDA leaks them)
  Stream, Event (record, synchronize, query,
  time_since, time_till, ipc_handle,
  from_ipc_handle) ............................ same; Event.record() with no stream records on the
                                                legacy stream of the event's own context
  Module, module_from_buffer, module_from_file,
  get_function, get_global .................... same
  get_texref, get_surfref ..................... missing (texture and surface references were removed
                                                in CUDA 12)
  Function: __call__ (block, grid, stream,
  shared, time_kernel), prepare, prepared_call,
  prepared_async_call, prepared_timed_call,
  _launch_kernel, get/set_attribute,
  set_cache_config, set_shared_config,
  num_regs & other attribute names ............ same packing (bytes by struct format, native alignment;
                                                by Python type in __call__; plain Python numbers refused
                                                there); the driver reads the same block through
                                                kernelParams at the kernel's offsets; a block shorter than
                                                the kernel's parameters is refused before the launch; the
                                                pre-CUDA-4 calls (param_set*, launch_grid*, set_block_
                                                shape) and texrefs are missing
  In, Out, InOut, ArgumentHandler ............. same
  DeviceAllocation, PointerHolderBase ......... differs: a DeviceAllocation is an int (its address):
                                                int(a), a + 4, np.intp(a), == by address
  mem_alloc, mem_alloc_like ................... differs: memory from the device's stream-ordered pool,
                                                allocated and freed on the context's legacy stream
                                                (IRONACCEL_CUDA_PYCUDA_ALLOC=sync: cuMemAlloc)
  mem_alloc_pitch, mem_get_info,
  mem_get_address_range ....................... same
  memcpy_htod, memcpy_dtoh .................... same guarantees (htod returns once the source may be
                                                reused, dtoh once the data is there); small copies are
                                                staged through page-locked slots, large pageable ones
                                                through ironaccel's copy pipeline
  memcpy_*_async, memcpy_dtod(_async),
  memset_d8/16/32(_async), memset_d2d*(_async)  same
  memcpy_peer(_async) ......................... same (defaults: the current context; PyCUDA's default
                                                handling is inverted and fails)
  pagelocked_*, aligned_*, managed_*,
  register_host_memory, HostPointer,
  PagelockedHostAllocation (HostAllocation),
  AlignedHostAllocation, RegisteredHostMemory,
  ManagedAllocation ........................... same, except: ManagedAllocation is not a
                                                DeviceAllocation subclass; AlignedHostAllocation.free()
                                                leaves the memory to the arrays over it
  mem_get_ipc_handle, IPCMemoryHandle ......... same (legacy IPC needs cuMemAlloc memory:
                                                IRONACCEL_CUDA_PYCUDA_ALLOC=sync)
  Memcpy2D, Memcpy3D, Memcpy3DPeer ............ same, without set_src_array / set_dst_array
  Linker ...................................... differs: nvJitLink instead of the driver's linker;
                                                JIT options map to nvJitLink flags where one exists
  to_device, from_device, from_device_like,
  set_debugging, dtype_to_array_format,
  start_profiler, stop_profiler,
  ManagedAllocationOrStub ..................... same
  ArrayDescriptor, ArrayDescriptor3D .......... data holders only
  Array, TextureReference, SurfaceReference,
  memcpy_htoa/atoh/dtoa/atod/atoa,
  matrix_to_array, np_to_array,
  gpuarray_to_array, make_multichannel_2d_array,
  bind_array_to_texref, matrix_to_texref,
  initialize_profiler ......................... missing (LogicError, also ironaccel Unsupported)
  have_gl_ext ................................. False (pycuda.gl is missing)

  pycuda.compiler
  SourceModule, compile, compile_plain,
  DEFAULT_NVCC_FLAGS .......................... differs: NVRTC, nvcc options translated; cache_dir and
                                                nvcc are accepted and unused (ironaccel's compile cache);
                                                PyCUDA's own headers are not provided; an alignment
                                                attribute after a struct's closing brace is moved
                                                before it, where nvcc (not NVRTC) applies it
  DynamicModule, DynamicSourceModule .......... differs: sources as relocatable CUBIN, linked by
                                                nvJitLink with libcudadevrt.a from pip or a toolkit
  get_nvcc_version, preprocess_source ......... differs: report NVRTC; return the source

  pycuda.tools
  make_default_context, get_default_device,
  clear_context_caches, context_dependent_
  memoize, mark_cuda_test, init_cuda_context_
  fixture, dtype_to_ctype, get_or_register_
  dtype, register_dtype, parse_c_arg,
  get_arg_type, Argument, VectorArg,
  ScalarArg, DeviceData, OccupancyRecord,
  bitlog2, PageLockedMemoryPool,
  PageLockedAllocator ......................... same
  DeviceMemoryPool, PooledDeviceAllocation .... differs: blocks from ironaccel's MemPool (power-of-two
                                                sizes; bin_number/alloc_size keep PyCUDA's bins)
  DebugMemoryPool ............................. missing

  pycuda.autoinit ............................. differs: pushes the retained primary context (PyCUDA creates
                                                one), so CuPy's, PyTorch's and the runtime's memory and
                                                streams work with its kernels
  pycuda.autoprimaryctx ....................... same
  pycuda.gpuarray.vec (char1 ... double2,
  make_*) ..................................... same
  GPUArray and the rest of pycuda.gpuarray,
  pycuda.elementwise, cumath, curandom,
  reduction, scan, sparse, characterize,
  debug, gl, compyte .......................... missing: above the driver layer
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from typing import Any

from .._alias import AliasLoader

VERSION = (2026, 1)
VERSION_STATUS = ""
VERSION_TEXT = ".".join(str(x) for x in VERSION) + VERSION_STATUS

SUBMODULES = ("driver", "_driver", "compiler", "tools", "autoinit", "autoprimaryctx", "gpuarray")

__all__ = ["install", "installed", "VERSION", "VERSION_STATUS", "VERSION_TEXT", "SUBMODULES"]


class _Finder(importlib.abc.MetaPathFinder):
    """Answers every `pycuda` / `pycuda.*` import with this package's modules."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "pycuda" and not fullname.startswith("pycuda."):
            return None
        rest = fullname[len("pycuda."):] if fullname != "pycuda" else ""
        if rest and rest.split(".")[0] not in SUBMODULES:
            loader = AliasLoader(None, f"{fullname} is not part of ironaccel's PyCUDA surface (driver level: "
                                  f"{', '.join('pycuda.' + s for s in SUBMODULES if not s.startswith('_'))})")
        else:
            loader = AliasLoader(__name__ + ("." + rest if rest else ""))
        return importlib.machinery.ModuleSpec(fullname, loader, is_package=not rest)


_finder = _Finder()


def install() -> None:
    """Make `import pycuda`, `import pycuda.driver`, ... resolve to this package in this process.

    Idempotent.  InvalidState if the real PyCUDA is already imported here.
    """
    existing = sys.modules.get("pycuda")
    if existing is not None and existing is not sys.modules[__name__]:
        from ironaccel.errors import InvalidState

        where = getattr(existing, "__file__", "?")
        raise InvalidState("cuda", "install", detail=f"the real PyCUDA ({where}) is already "
                                                     "imported in this process; call install() before importing it")
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def installed() -> bool:
    """True once `install()` made `pycuda` this package."""
    return _finder in sys.meta_path
