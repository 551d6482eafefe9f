"""The coverage map: every public name of cuda.core 1.2, what the compat gives for it, and how it differs.

`ENTRIES` is the single source: the package docstring and the README section are
rendered from it (`render()`), and a test checks that every name listed is importable
from the compat and that each "missing" one raises Unsupported when used.
Status: "same" (cuda.core's API and semantics), "differs" (the API, with the
difference noted), "missing" (importable; using it raises `Unsupported`, a
NotImplementedError, naming the ironaccel feature it waits for).
"""

from __future__ import annotations

from . import _needs as n

SAME, DIFFERS, MISSING = "same", "differs", "missing"

# (cuda.core name or names, status, what the compat builds it on / how it differs / what it needs)
ENTRIES: tuple[tuple[str | tuple[str, ...], str, str], ...] = (
    # -- cuda.core ---------------------------------------------------------------------------
    ("Device", DIFFERS, "an ironaccel `Device` (per-thread singleton as in cuda.core); `uuid` without "
                        "the GPU- prefix, `arch` is \"90\" (ironaccel's own: \"sm_90\"); `create_context` makes a "
                        "green context (ironaccel's `GreenContext`); `to_system_device`: missing (" + n.NVML + ")"),
    ("Device.properties", SAME, "every CU_DEVICE_ATTRIBUTE_* cuda.core lists, read once each"),
    ("Context", DIFFERS, "a view of the primary context ironaccel retains (`close()` releases nothing) or of a "
                         "green context, ironaccel's `GreenContext` (`close()` destroys it with its streams and "
                         "events at once; cuda.core: when the last stream goes)"),
    ("ContextOptions", SAME, "resources: SM groups (and a workqueue) for a green context"),
    ("Stream", SAME, "an ironaccel `Stream`: `sync()` is ironaccel's compiled `Stream.synchronize`, `record`/`wait` "
                     "its own; `handle` is a `CUstream` as in cuda.core; a green context's streams are "
                     "cuGreenCtxStreamCreate's"),
    ("StreamOptions", SAME, "nonblocking, priority (range checked against cuCtxGetStreamPriorityRange)"),
    ("LEGACY_DEFAULT_STREAM", SAME, "handle 1 in whichever context is current (cuda.core 1.2 semantics)"),
    ("PER_THREAD_DEFAULT_STREAM", SAME, "handle 2, likewise"),
    ("Event", SAME, "an ironaccel `Event`: `sync()`, `is_done`, `close()` are ironaccel's; `e2 - e1` in ms; IPC "
                    "events through the driver's event IPC calls"),
    ("EventOptions", SAME, "timing_enabled, blocking_sync, ipc_enabled"),
    ("Buffer", DIFFERS, "its own class; memory from DeviceMemoryResource is an ironaccel `DeviceBuf` (alloc/free on "
                        "the compiled hot path); `close(s)` with another stream than the allocation stream orders "
                        "the free after `s` and frees on the allocation stream; `ipc_descriptor`, "
                        "`from_ipc_descriptor` and pickling through ironaccel's `ipc.IpcBuffer` (a process imports "
                        "a pointer once and unmaps it after its last Buffer; closing an imported Buffer without a "
                        "stream waits for the device first); a graph node that uses a Buffer shares its memory "
                        "(`close()` then drops only the Buffer's claim); `copy_to`/`copy_from` with `options` "
                        "make one copy of a batch (cuMemcpyBatchAsync), so every option is honored on a CUDA 13.0 "
                        "driver, where cuda.core (which asks 13.2's cuMemcpyWithAttributesAsync) drops them or "
                        "raises RuntimeError for DURING_API_CALL"),
    ("MemoryResource", SAME, "abstract base (allocate, deallocate, is_device_accessible, is_host_accessible, "
                             "device_id; is_managed defaults to False)"),
    ("DeviceMemoryResource", DIFFERS, "without options on the device's current pool through ironaccel's "
                                      "`Device.alloc` (release threshold raised as cuda.core does unless "
                                      "IRONACCEL_CUDA_POOL_RELEASE_THRESHOLD is set); with options a pool of its "
                                      "own (an ironaccel `DriverPool`); attributes, `peer_accessible_by` (get and "
                                      "set); IPC (`ipc_enabled=True`): allocation handle, mapped resources, "
                                      "registry and multiprocessing pickling as in cuda.core, through "
                                      "ironaccel's `ipc.IpcPool` / `ipc.IpcBuffer`"),
    ("DeviceMemoryResourceOptions", SAME, "ipc_enabled, max_size"),
    ("LegacyPinnedMemoryResource", DIFFERS, "ironaccel `PinnedBuf` (cuMemHostAlloc, portable; cuda.core uses "
                                            "cuMemAllocHost)"),
    ("PinnedMemoryResource", DIFFERS, "a host memory pool as an ironaccel `DriverPool` (the current one, or "
                                      "a host pool of its own with options, on a NUMA node for IPC); "
                                      "opened to the current device; IPC as DeviceMemoryResource's"),
    ("PinnedMemoryResourceOptions", SAME, "ipc_enabled, max_size, numa_id"),
    ("ManagedMemoryResource", SAME, "a managed memory pool as an ironaccel `DriverPool` (the current one, or "
                                    "a managed pool of its own with the preferred location); gives "
                                    "ManagedBuffers"),
    ("ManagedMemoryResourceOptions", SAME, "preferred_location, preferred_location_type (validated as cuda.core)"),
    ("ManagedBuffer", SAME, "read_mostly, preferred_location, accessed_by (a live set), prefetch, discard, "
                            "discard_prefetch: cuMemAdvise / cuMemRangeGetAttribute / cuMemPrefetchAsync / the "
                            "CUDA 13 discard batches"),
    ("VirtualMemoryResource", DIFFERS, "one ironaccel `VirtualBuffer` per buffer (pinned device memory, POSIX-fd or "
                                       "no handle, either granularity, GPUDirect RDMA, self/peer access); "
                                       "`modify_allocation` grows past the reservation by a new one and a copy (the "
                                       "address changes); host/managed locations, addr_hint/addr_align: "
                                       "NotImplementedError"),
    ("VirtualMemoryResourceOptions", SAME, "the fields and the spec validators (`_access_to_flags`, ...)"),
    ("GraphMemoryResource", SAME, "cuMemAllocAsync / cuMemFreeAsync on the capturing stream (graph memory "
                                  "nodes); refuses a non-capturing stream as cuda.core does; attributes and trim "
                                  "through cuDeviceGet/SetGraphMemAttribute and cuDeviceGraphMemTrim"),
    ("Host", SAME, "a location value for managed-memory operations"),
    ("Program", DIFFERS, "C++ through ironaccel's NVRTC `Program` (with its memory and disk caches) to PTX, CUBIN or "
                         "LTO-IR; `handle` is the Program itself (ironaccel keeps no nvrtcProgram), `pch_status` is "
                         "NVRTC's precompiled-header status of the last compile; PTX programs are linked by the "
                         "compat's `Linker` (their `handle` is its nvJitLink handle); NVVM IR compiles with libNVVM "
                         "through cuda.bindings.nvvm (ironaccel has no NVVM compiler of its own)"),
    ("ProgramOptions", SAME, "every option, written to NVRTC / NVVM option strings as cuda.core writes them"),
    ("ObjectCode", DIFFERS, "loaded lazily once, context-independently, as ironaccel's `Library` (cuLibraryLoadData, "
                            "as cuda.core); `handle` is its `CUlibrary`, `get_module()` its `CUmodule` in the current "
                            "context; PTX newer than the driver's JIT is compiled for the current device by nvJitLink "
                            "(cuda.core: the load fails)"),
    ("Kernel", SAME, "an ironaccel `Function` of the library's `CUkernel`; `handle` is that `CUkernel`; `from_handle` "
                     "takes the compat's own handles or a foreign `CUkernel`; `occupancy` is ironaccel's `Function` "
                     "occupancy queries"),
    ("Linker", DIFFERS, "ironaccel's nvJitLink session (`linker.LinkSession`): the handle is made and the inputs added "
                        "when the Linker is, failures raise cuda.bindings' `nvJitLinkError` as in cuda.core, the logs "
                        "outlive `close()`; no driver (cuLink) backend: without nvJitLink, `Linker` raises "
                        "NotAvailable"),
    ("LinkerOptions", SAME, "written to nvJitLink option strings and to the driver's CUjit options as cuda.core "
                            "writes them"),
    ("LaunchConfig", SAME, "grid (in clusters when `cluster` is set), cluster, block, shmem_size, is_cooperative, "
                           "programmatic_stream_serialization; `launch` hands the attributes to ironaccel's "
                           "`LaunchConfig` (cuLaunchKernelEx)"),
    ("launch", SAME, "ironaccel's `Function.launch` (arguments packed against the kernel's own parameter layout); "
                     "Buffer arguments become their address; ctypes scalars, complex and subclasses are converted "
                     "on a cold retry"),
    ("DeviceResources", SAME, "cuDeviceGetDevResource / cuCtxGetDevResource / cuGreenCtxGetDevResource"),
    ("SMResource", DIFFERS, "`split` is cuDevSmResourceSplitByCount (the CUDA 13.0 driver's split): one count for "
                            "every group, `backfill` is CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, fewer "
                            "groups than asked is CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION; per-group counts and "
                            "co-scheduled counts (cuDevSmResourceSplit, CUDA 13.1) raise RuntimeError"),
    ("SMResourceOptions", SAME, "count, coscheduled_sm_count, preferred_coscheduled_sm_count, backfill"),
    ("WorkqueueResource", SAME, "query and configure; needs a CUDA 13.1 driver (RuntimeError before, as cuda.core)"),
    ("WorkqueueResourceOptions", SAME, "sharing_scope, concurrency_limit (checked when made)"),
    ("GraphicsResource", MISSING, n.GRAPHICS),
    ("TensorMapDescriptor", MISSING, n.TENSOR_MAP),
    ("TensorMapDescriptorOptions", MISSING, n.TENSOR_MAP),
    # -- cuda.core.graph -----------------------------------------------------------------------
    ("graph.GraphBuilder", DIFFERS, "stream capture on ironaccel's `Stream.begin_capture`, split/join, complete, "
                                    "debug_dot_print; conditionals (if, if-else, switch, while: bodies captured on "
                                    "their own streams with cuStreamBeginCaptureToGraph), `embed` (a child graph "
                                    "node), `callback` (ironaccel's host functions, or a ctypes pointer with copied "
                                    "user data; held per node, as a GraphDefinition's nodes are, and so by embedded "
                                    "copies); `graph_definition` is a GraphDefinition view of the captured graph"),
    ("graph.Graph", DIFFERS, "ironaccel's `GraphExec` (launch; update from a builder or a definition, after which "
                             "it holds what the source holds) plus cuGraphUpload; `graph[node]` gives the "
                             "Executable*Node views"),
    ("graph.GraphCompleteOptions", DIFFERS, "the CUDA_GRAPH_INSTANTIATE_FLAG_* of ironaccel's `Graph.instantiate`; "
                                            "upload_stream uploads right after instantiation (cuGraphUpload)"),
    ("graph.GraphDebugPrintOptions", SAME, "the CU_GRAPH_DEBUG_DOT_FLAGS_* of debug_dot_print"),
    ("graph.GraphDefinition", DIFFERS, "a root definition owns an ironaccel `Graph`; nodes are the driver's "
                                       "(cuGraphAdd*Node), kernel nodes pack arguments as ironaccel's graphs do, "
                                       "host callbacks are ironaccel's graph host functions; each node's "
                                       "attachments are held by a CUDA user object of its graph (so clones through "
                                       "the raw handle, executable graphs still running and embedded copies keep "
                                       "them) and released from the main thread after the driver lets go"),
    ("graph.GraphCondition", SAME, "cuGraphConditionalHandleCreate; passed to kernels as its handle"),
    (("graph.GraphNode", "graph.KernelNode", "graph.MemcpyNode", "graph.MemsetNode", "graph.EmptyNode",
      "graph.EventRecordNode", "graph.EventWaitNode", "graph.ChildGraphNode", "graph.AllocNode", "graph.FreeNode",
      "graph.HostCallbackNode", "graph.ConditionalNode", "graph.IfNode", "graph.IfElseNode", "graph.SwitchNode",
      "graph.WhileNode"), DIFFERS, "one Python object per driver node (`pred`/`succ` are mutable sets of edges); "
                                   "`update()` of kernel, memset, memcpy, event and host-callback nodes "
                                   "(cuGraph*NodeSet*); `ChildGraphNode.update`: missing (" + n.GRAPH_NODES + ")"),
    (("graph.ExecutableGraphNode", "graph.ExecutableKernelNode", "graph.ExecutableMemcpyNode",
      "graph.ExecutableMemsetNode", "graph.ExecutableChildGraphNode", "graph.ExecutableEventRecordNode",
      "graph.ExecutableEventWaitNode", "graph.ExecutableHostCallbackNode"), SAME,
     "cuGraphExec*SetParams, cuGraphNodeSetEnabled / GetEnabled"),
    # -- cuda.core.utils -----------------------------------------------------------------------
    ("utils.StridedMemoryView", DIFFERS, "from DLPack (ironaccel's importer), CUDA Array Interface, NumPy array "
                                         "interface or a Buffer; `view(dtype=)`, DLPack export; `_layout` "
                                         "(cuda.core's `_StridedLayout`: strides in elements and bytes, "
                                         "contiguity, offsets; made on first access; its transformations: "
                                         "missing); "
                                         "`__dlpack_c_exchange_api__`: missing; `copy_from`/`copy_to`: "
                                         "missing (" + n.STRIDED_COPY + "); `as_tensor_map`, `view(layout=)`: missing "
                                         "(" + n.TENSOR_MAP + ")"),
    ("utils.args_viewable_as_strided_memory", SAME, "the decorator and its view proxies"),
    ("utils.ProgramCacheResource", SAME, "abstract mapping of key to compiled bytes"),
    ("utils.InMemoryProgramCache", SAME, "LRU in the process, optional byte cap"),
    ("utils.FileStreamProgramCache", DIFFERS, "a folder of atomically written entries with an LRU byte cap; clear and "
                                              "eviction spare an entry another process replaced (its own layout; not "
                                              "shared with cuda.core's files; no Windows sharing-violation retries)"),
    ("utils.make_program_cache_key", DIFFERS, "its own digest, per backend as cuda.core's (NVRTC: options as NVRTC "
                                              "writes them, name expressions unordered; PTX: the linker's fields and "
                                              "backend version; NVVM: libNVVM's versions); refuses the same inputs "
                                              "cuda.core refuses; keys differ from cuda.core's (no cuda-core "
                                              "version in them)"),
    ("utils.copy_batch", SAME, "one cuMemcpyBatchAsync through ironaccel's `copy_batch` (runs of equal options "
                               "passed once); the same TypeErrors and ValueErrors; an empty batch does nothing"),
    (("utils.CopyOptions", "utils.MemcpySrcAccessOrder", "utils.MemcpyOverlapMode"), SAME,
     "frozen options, strings normalised to the enums at construction; Device / Host location hints"),
    (("utils.prefetch_batch", "utils.discard_batch", "utils.discard_prefetch_batch"), SAME,
     "cuMemPrefetchBatchAsync, cuMemDiscardBatchAsync, cuMemDiscardAndPrefetchBatchAsync"),
    # -- other modules -------------------------------------------------------------------------
    ("typing", SAME, "the StrEnums and aliases: same names and values"),
    (("system.get_num_devices", "system.get_user_mode_driver_version", "system.get_process_name"), DIFFERS,
     "from the CUDA driver and /proc; CUDA_BINDINGS_NVML_IS_COMPATIBLE is False"),
    (("system.get_nvml_version", "system.get_driver_branch", "system.get_kernel_mode_driver_version"), MISSING,
     "and the NVML Device and events: " + n.NVML),
    (("texture.OpaqueArray", "texture.OpaqueArrayOptions", "texture.MipmappedArray", "texture.MipmappedArrayOptions",
      "texture.TextureObject", "texture.TextureObjectOptions", "texture.SurfaceObject", "texture.ResourceDescriptor"),
     MISSING, n.TEXTURES),
    ("checkpoint.Process", MISSING, n.CHECKPOINT),
    (("_utils.cuda_utils.CUDAError", "_utils.cuda_utils.NVRTCError", "_utils.cuda_utils.handle_return",
      "_utils.cuda_utils.ComputeCapability", "_utils.cuda_utils.driver", "_utils.cuda_utils.nvrtc"), DIFFERS,
     "CUDAError is also an ironaccel DriverError (a RuntimeError); errors raised inside ironaccel's own hot methods "
     "(a failing `Stream.sync()`) stay ironaccel DriverErrors: catch DriverError or RuntimeError for both"),
)

DIFFERENCES = (
    "`import cuda.core` gives the compat only after `ironaccel_cuda_compat.cuda_core.install()`; the compat itself "
    "never imports cuda.core.",
    "Compat objects are ironaccel objects: a compat Device, Stream or Event goes wherever ironaccel_cuda takes one, "
    "and ironaccel Streams are accepted wherever the compat takes a stream.",
    "C++ compiles go through ironaccel's NVRTC caches (memory and disk) whatever `cache=` says; `cache=` adds "
    "cuda.core's explicit cache on top.",
    "Creating a Device does not change the current context (as in cuda.core); `set_current()` must come before "
    "streams, events, allocations and module loads, as in cuda.core.",
    "Memory resources refuse to allocate on a capturing GraphBuilder, as cuda.core does, but do not ask the driver "
    "whether a Stream argument is capturing (a driver call per allocation); `VirtualMemoryResource."
    "modify_allocation` moves a buffer that outgrows its reservation (new address, bytes copied).",
)


# cuda.core's own tests (run by tools/run_cuda_core_tests.py) that cannot pass yet, and why.
TEST_GAPS: tuple[tuple[str, str], ...] = (
    ("test_device.py::test_to_system_device", n.NVML),
    ("test_linker.py::test_linker_link_ptx_culink, ::test_driver_linker_* (driver-backend cases)",
     "the driver's cuLink backend, which ironaccel does not have: cuda.core runs them only where nvJitLink is "
     "missing, so they skip under nvJitLink with cuda-core too"),
    ("test_memory.py::test_vmm_allocator_grow_allocation_fast_path",
     "cuda.core's internal `_grow_allocation_fast_path`, which the test mocks (the compat grows through ironaccel's "
     "VirtualBuffer)"),
    ("memory_ipc/test_peer_access.py, the two-GPU cases of test_device, test_memory and graph", "a machine with two "
     "GPUs"),
    ("test_green_context.py: workqueue cases (skip on a CUDA 13.0 driver), ::test_arch_constraints_pre_hopper "
     "(skips on Hopper)", "the environment, as with cuda-core itself"),
    ("memory/test_managed_ops.py::TestManagedBuffer::test_preferred_location_roundtrip_host_numa",
     "skips: host-NUMA preferred locations are not supported by this driver / machine"),
    ("cases that skip on the machine (no CuPy / numba / nvfatbin / CUDA headers, one GPU, PTX newer than the "
     "driver, sm_100, NVRTC 13.2, GPUDirect RDMA, cuda.core's own skips for ManagedMR IPC and for node types "
     "without attributes)", "the environment: they skip with cuda-core itself too, and a skip counts as a failure "
     "(`--against cuda.core` runs the same tests on cuda-core for the baseline)"),
)


def render() -> str:
    """The coverage map as Markdown (the package docstring and the README carry it)."""
    lines = ["| cuda.core 1.2 | status | compat: built on, differences, or what it waits for |", "|---|---|---|"]
    for names, status, note in ENTRIES:
        shown = ", ".join(f"`{x}`" for x in ((names,) if isinstance(names, str) else names))
        lines.append(f"| {shown} | {status} | {note.replace('|', '/')} |")
    lines.append("")
    lines.append("Differences worth knowing:")
    lines.append("")
    lines.extend(f"- {d}" for d in DIFFERENCES)
    lines.append("")
    lines.append("cuda.core's own tests that cannot pass yet (tools/run_cuda_core_tests.py lists every case):")
    lines.append("")
    lines.append("| tests | why |")
    lines.append("|---|---|")
    lines.extend(f"| {t} | {why} |" for t, why in TEST_GAPS)
    return "\n".join(lines) + "\n"
