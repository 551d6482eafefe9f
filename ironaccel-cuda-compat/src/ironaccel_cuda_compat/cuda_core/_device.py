"""cuda.core's `Device`: an ironaccel `Device`, one object per thread and ordinal.

`Device(i)` is ironaccel_cuda's `Device` (same shared per-device state, primary
context, attributes), so it can be passed to anything in ironaccel.  As in cuda.core,
creating one does not touch the current context; `set_current()` makes the primary
context current and must come before creating streams, events or modules.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ironaccel_cuda import current_device_ordinal, device_attribute

from . import _ia, _needs
from ._event import CU_EVENT_BLOCKING_SYNC, CU_EVENT_DISABLE_TIMING, Event, EventOptions
from ._utils.cuda_utils import ComputeCapability, CUDAError, call, driver, guarded

__all__ = ["Device"]

_tls = threading.local()

_INT_PROPERTIES = (
    "max_threads_per_block max_block_dim_x max_block_dim_y max_block_dim_z max_grid_dim_x max_grid_dim_y "
    "max_grid_dim_z max_shared_memory_per_block total_constant_memory warp_size max_pitch maximum_texture1d_width "
    "maximum_texture1d_linear_width maximum_texture1d_mipmapped_width maximum_texture2d_width "
    "maximum_texture2d_height maximum_texture2d_linear_width maximum_texture2d_linear_height "
    "maximum_texture2d_linear_pitch maximum_texture2d_mipmapped_width maximum_texture2d_mipmapped_height "
    "maximum_texture3d_width maximum_texture3d_height maximum_texture3d_depth maximum_texture3d_width_alternate "
    "maximum_texture3d_height_alternate maximum_texture3d_depth_alternate maximum_texturecubemap_width "
    "maximum_texture1d_layered_width maximum_texture1d_layered_layers maximum_texture2d_layered_width "
    "maximum_texture2d_layered_height maximum_texture2d_layered_layers maximum_texturecubemap_layered_width "
    "maximum_texturecubemap_layered_layers maximum_surface1d_width maximum_surface2d_width maximum_surface2d_height "
    "maximum_surface3d_width maximum_surface3d_height maximum_surface3d_depth maximum_surface1d_layered_width "
    "maximum_surface1d_layered_layers maximum_surface2d_layered_width maximum_surface2d_layered_height "
    "maximum_surface2d_layered_layers maximum_surfacecubemap_width maximum_surfacecubemap_layered_width "
    "maximum_surfacecubemap_layered_layers max_registers_per_block clock_rate texture_alignment "
    "texture_pitch_alignment multiprocessor_count compute_mode pci_bus_id pci_device_id pci_domain_id "
    "memory_clock_rate global_memory_bus_width l2_cache_size max_threads_per_multiprocessor compute_capability_major "
    "compute_capability_minor max_shared_memory_per_multiprocessor max_registers_per_multiprocessor "
    "multi_gpu_board_group_id single_to_double_precision_perf_ratio max_shared_memory_per_block_optin "
    "max_blocks_per_multiprocessor max_persisting_l2_cache_size max_access_policy_window_size "
    "reserved_shared_memory_per_block gpu_direct_rdma_flush_writes_options gpu_direct_rdma_writes_ordering "
    "mempool_supported_handle_types numa_config numa_id surface_alignment async_engine_count "
    "maximum_texture2d_gather_width maximum_texture2d_gather_height mem_sync_domain_count host_numa_id "
    "mem_decompress_algorithm_mask mem_decompress_maximum_length gpu_pci_device_id gpu_pci_subsystem_id"
).split()
_BOOL_PROPERTIES = (
    "gpu_overlap kernel_exec_timeout integrated can_map_host_memory concurrent_kernels ecc_enabled tcc_driver "
    "unified_addressing global_l1_cache_supported local_l1_cache_supported managed_memory multi_gpu_board "
    "host_native_atomic_supported pageable_memory_access concurrent_managed_access compute_preemption_supported "
    "can_use_host_pointer_for_registered_mem cooperative_launch pageable_memory_access_uses_host_page_tables "
    "direct_managed_mem_access_from_host virtual_memory_management_supported "
    "handle_type_posix_file_descriptor_supported handle_type_win32_handle_supported "
    "handle_type_win32_kmt_handle_supported generic_compression_supported gpu_direct_rdma_with_cuda_vmm_supported "
    "sparse_cuda_array_supported read_only_host_register_supported memory_pools_supported gpu_direct_rdma_supported "
    "deferred_mapping_cuda_array_supported can_tex2d_gather stream_priorities_supported can_flush_remote_writes "
    "host_register_supported timeline_semaphore_interop_supported cluster_launch can_use_64_bit_stream_mem_ops "
    "can_use_stream_wait_value_nor dma_buf_supported ipc_event_supported tensor_map_access_supported "
    "handle_type_fabric_supported unified_function_pointers multicast_supported mps_enabled d3d12_cig_supported "
    "vulkan_cig_supported host_numa_virtual_memory_management_supported host_numa_memory_pools_supported "
    "host_numa_multinode_ipc_supported host_memory_pools_supported host_virtual_memory_management_supported "
    "host_alloc_dma_buf_supported only_partial_host_native_atomic_supported"
).split()


def _attribute(name: str, kind: type) -> property:
    enum_name = "CU_DEVICE_ATTRIBUTE_" + name.upper()

    def get(self: DeviceProperties) -> Any:
        cache = self._cache
        try:
            return cache[name]
        except KeyError:
            pass
        attr = getattr(driver.CUdevice_attribute, enum_name, None)
        value = 0
        if attr is not None:
            try:
                value = device_attribute(self._handle, attr)
            except _ia.DriverError as exc:
                if exc.code is None:
                    raise
                value = 0  # an attribute this driver does not know
        cache[name] = result = kind(value)
        return result

    get.__name__ = name
    return property(get, doc=f"{enum_name} of this device ({kind.__name__}).")


class DeviceProperties:
    """Every `CU_DEVICE_ATTRIBUTE_*` of one device as a read-only property, queried once each."""

    __slots__ = ("_handle", "_cache")
    _handle: int
    _cache: dict[str, Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("DeviceProperties cannot be instantiated directly. Please use Device APIs.")

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...  # the properties are made below, from the tables

    @classmethod
    def _init(cls, handle: int) -> DeviceProperties:
        self = object.__new__(cls)
        self._handle = handle
        self._cache = {}
        return self


for _name in _INT_PROPERTIES:
    setattr(DeviceProperties, _name, _attribute(_name, int))
for _name in _BOOL_PROPERTIES:
    setattr(DeviceProperties, _name, _attribute(_name, bool))
del _name


def _ordinal_of(device_id: Any) -> int:
    if device_id is None:
        current = guarded(current_device_ordinal)
        return 0 if current is None else int(current)  # no context current: the default is device 0
    if isinstance(device_id, Device):
        return device_id.ordinal
    if isinstance(device_id, bool) or not hasattr(device_id, "__index__"):
        raise TypeError(f"device_id must be an int or a Device, got {type(device_id).__name__}")
    ordinal = device_id.__index__()
    count = _ia.device_count()
    if not 0 <= ordinal < count:
        raise ValueError(f"device_id must be within [0, {count}), got {ordinal}")
    return ordinal


def _thread_devices() -> dict[int, Device]:
    try:
        return _tls.devices
    except AttributeError:
        devices: dict[int, Device] = {}
        _tls.devices = devices
        return devices


class Device(_ia.IaDevice):
    """A CUDA device: the same object for the same ordinal on one thread (cuda.core semantics).

    It is an ironaccel_cuda `Device` too: `alloc`, `load_module`, `create_pool` and the
    rest of ironaccel's API work on it.
    """

    _ctx: Any
    _ia_default: Any
    _has_inited: bool
    _properties: DeviceProperties | None
    _memory_resource: Any
    _resources: Any
    _set_context: Any
    _green_current: Any

    def __new__(cls, device_id: Any = None) -> Device:
        ordinal = _ordinal_of(device_id)
        devices = _thread_devices()
        dev = devices.get(ordinal)
        if dev is None:
            dev = super().__new__(cls)
            st = _ia.state_for(ordinal)
            dev._init(st)
            dev._ctx = st.ctx
            dev._ia_default = st.default_stream
            dev._has_inited = False
            dev._properties = None
            dev._memory_resource = None
            dev._resources = None
            dev._set_context = None
            dev._green_current = None
            devices[ordinal] = dev
        return dev

    def __init__(self, device_id: Any = None) -> None:
        pass

    def _check_context_initialized(self) -> None:
        if not self._has_inited:
            raise CUDAError(f"Device {self.ordinal} is not yet initialized, perhaps you forgot to call "
                            ".set_current() first?")

    @classmethod
    def get_all_devices(cls) -> tuple[Device, ...]:
        return tuple(cls(i) for i in range(_ia.device_count()))

    # -- identity ------------------------------------------------------------

    @property
    def device_id(self) -> int:
        return self.ordinal

    @property
    def uuid(self) -> str:
        """The device UUID without the "GPU-" prefix, e.g. "c8a3...-....".

        (ironaccel's `Device.uuid` has the prefix.)
        """
        text = _ia.IaDevice.uuid.fget(self)  # type: ignore[attr-defined]
        return text[4:] if text.startswith("GPU-") else text

    @property
    def properties(self) -> DeviceProperties:
        if self._properties is None:
            self._properties = DeviceProperties._init(self.ordinal)
        return self._properties

    @property
    def compute_capability(self) -> ComputeCapability:  # type: ignore[override]
        return ComputeCapability(*self._state.attributes.compute_capability)

    @property
    def arch(self) -> str:  # type: ignore[override]
        """The compute capability as digits, "90" for 9.0 (ironaccel's `Device.arch` is "sm_90")."""
        major, minor = self._state.attributes.compute_capability
        return f"{major}{minor}"

    def can_access_peer(self, peer: Any) -> bool:
        return _ia.IaDevice.can_access_peer(self, peer if isinstance(peer, Device) else Device(peer))

    def to_system_device(self) -> Any:
        from ._missing import missing_error

        raise missing_error("Device.to_system_device", _needs.NVML)

    @property
    def resources(self) -> Any:
        """This device's SM and workqueue resources (what green contexts are made from)."""
        if self._resources is None:
            from ._device_resources import DeviceResources

            self._resources = DeviceResources._init(self.ordinal)
        return self._resources

    # -- context --------------------------------------------------------------

    @property
    def context(self) -> Any:
        """The context `set_current()` last made current through this Device (by default the primary one)."""
        self._check_context_initialized()
        return self._context

    @property
    def _context(self) -> Any:
        from ._context import Context

        ctx = self._set_context
        return ctx if ctx is not None else Context._from_ctx(self._state.ctx, self.ordinal)

    def set_current(self, ctx: Any = None) -> Any:
        """Make this device's primary context (or `ctx`) current on this thread.

        With `ctx`, returns the Context that was current before (None if none was).
        """
        from ._context import Context

        if ctx is None:
            _ia.bind(self._state.ctx)
            self._has_inited = True
            self._set_context = self._green_current = None
            return None
        if not isinstance(ctx, Context):
            raise TypeError("a Context object is required")
        if ctx._device_id != self.ordinal:
            raise RuntimeError("the provided context was created on the device with id="
                               f"{ctx._device_id}, which is different from the target device id={self.ordinal}")
        if ctx.is_closed:
            raise CUDAError("CUDA_ERROR_INVALID_CONTEXT: the provided context is closed")
        previous = self._set_context if self._has_inited else None
        before = _ia.current_context()
        _ia.bind_address(int(ctx._handle_int))
        self._has_inited = True
        self._set_context = ctx
        self._green_current = ctx if ctx.is_green else None
        if not before:
            return None
        if previous is not None and previous._handle_int == before:
            return previous
        return Context._from_ctx(driver.CUcontext(before), self.ordinal)

    def create_context(self, options: Any = None) -> Any:  # type: ignore[override]  # cuda.core's signature
        """A new green context over `options.resources` (SM groups from `resources.sm.split`), not made current."""
        from ._context import Context, ContextOptions
        from ._utils.cuda_utils import check_or_create_options

        if options is None:
            raise ValueError("options with device resources must be provided to create a green context")
        options = check_or_create_options(ContextOptions, options, "Context options")
        return Context._create_green(self, options)

    # -- streams, events, memory --------------------------------------------------

    @property
    def default_stream(self) -> Any:  # type: ignore[override]
        """LEGACY_DEFAULT_STREAM, or PER_THREAD_DEFAULT_STREAM when CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM=1.

        (ironaccel's `Device.default_stream` is its own permanent stream; reach it with
        `ironaccel_cuda.Device(i).default_stream`.)
        """
        from ._stream import default_stream

        return default_stream()

    def create_stream(self, obj: Any = None, options: Any = None) -> Any:  # type: ignore[override]
        from ._stream import Stream

        return Stream._init(obj=obj, options=options, device_id=self.ordinal)

    # A new event (EventOptions: timing off, no blocking sync, by default): compiled for the primary context and
    # plain options (`_core.compat_create_event`), else `_create_event_cold`.
    create_event = _ia.compat_create_event  # type: ignore[assignment]  # cuda.core takes options, not timing

    def _create_event_cold(self, options: Any) -> Any:
        if not self._has_inited:
            self._check_context_initialized()
        if self._green_current is not None:
            return Event._init(self, options, context=self._green_current)
        if options is None:
            flags = CU_EVENT_DISABLE_TIMING
        elif options.__class__ is EventOptions and not options.ipc_enabled:
            flags = (0 if options.timing_enabled else CU_EVENT_DISABLE_TIMING) | (
                CU_EVENT_BLOCKING_SYNC if options.blocking_sync else 0)
        else:
            return Event._init(self, options)
        e = self._event_of(Event, flags)  # compiled: made as ironaccel's create_event makes its own
        e._flags = flags
        return e

    @property
    def memory_resource(self) -> Any:
        """This Device object's resource (set it to change it); by default the device's DeviceMemoryResource."""
        mr = self._memory_resource
        if mr is None:
            mr = _default_resources.get(self.ordinal)
            if mr is None:
                from ._memory._device_memory_resource import DeviceMemoryResource
                from ._memory._legacy import _SynchronousMemoryResource

                if self._state.attributes.memory_pools_supported:
                    mr = DeviceMemoryResource(self.ordinal)
                else:
                    mr = _SynchronousMemoryResource(self.ordinal)
                _default_resources[self.ordinal] = mr
            self._memory_resource = mr
        return mr

    @memory_resource.setter
    def memory_resource(self, mr: Any) -> None:
        from ._memory._buffer import MemoryResource

        if not isinstance(mr, MemoryResource):
            raise TypeError("a MemoryResource object is required")
        self._memory_resource = mr

    # `size` bytes from this device's memory resource, stream-ordered on `stream`: compiled for the default
    # resource and an open Stream of this device (`_core.compat_device_allocate`), else `_allocate_cold`.
    allocate = _ia.compat_device_allocate

    def _allocate_cold(self, size: int, stream: Any) -> Any:
        if not self._has_inited:
            self._check_context_initialized()
        mr = self._memory_resource
        if mr is None:
            mr = self.memory_resource
        return mr.allocate(size, stream=stream)

    def sync(self) -> None:
        """Wait for all work on this device (cuCtxSynchronize)."""
        self._check_context_initialized()
        guarded(self.synchronize)

    def create_graph_builder(self) -> Any:
        from .graph._graph_builder import GraphBuilder

        self._check_context_initialized()
        return GraphBuilder._init(stream=self.create_stream(), is_stream_owner=True)

    def create_opaque_array(self, options: Any) -> Any:
        from ._missing import missing_error

        raise missing_error("Device.create_opaque_array", _needs.TEXTURES)

    create_mipmapped_array = create_opaque_array
    create_texture_object = create_opaque_array
    create_surface_object = create_opaque_array

    # -- protocols ---------------------------------------------------------------

    def __int__(self) -> int:
        return self.ordinal

    def __index__(self) -> int:
        return self.ordinal

    def __repr__(self) -> str:
        return f"<Device {self.ordinal} ({self.name})>"

    def __hash__(self) -> int:
        return hash((Device, self.ordinal))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Device):
            return NotImplemented
        return self.ordinal == other.ordinal

    def __reduce__(self) -> tuple[Any, ...]:
        return (Device, (self.ordinal,))


_default_resources: dict[int, Any] = {}
