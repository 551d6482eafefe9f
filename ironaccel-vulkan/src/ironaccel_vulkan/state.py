"""The state of one opened device: every Vulkan handle it owns.

`DeviceState` owns the instance, the logical device and its compute queue,
the command pool, descriptor pools, the pipeline cache, fences (through
`Timeline`), allocations, pipeline states and staging.  `VulkanDevice` (the
compute kit's front) holds it and tears it down with a finalizer, so a device
dropped without `close()` is still destroyed.  Every operation runs under
`lock`, which is also the front's lock.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from ironaccel.errors import InvalidArgument, NotAvailable

from . import results
from .binding import BACKEND, Binding
from .external import EXTENSIONS
from .instance import Instance
from .memory import next_id
from .physical import ENABLED_FEATURES, PhysicalDeviceInfo, feature_chain
from .submission import Timeline

__all__ = ["DeviceState"]

VK_STRUCTURE_TYPE_SUBMIT_INFO = 4
VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO = 5
VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO = 12
VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO = 2
VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO = 3
VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO = 39
VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO = 40
VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO = 42
VK_STRUCTURE_TYPE_MEMORY_BARRIER = 46
VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO = 33
VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO = 17
VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT = 0x2
VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT = 0x1
VK_DESCRIPTOR_TYPE_STORAGE_BUFFER = 7
VK_SHARING_MODE_EXCLUSIVE = 0

STAGE_HOST, STAGE_TRANSFER, STAGE_COMPUTE = 0x4000, 0x1000, 0x800
ACCESS_SHADER_READ, ACCESS_SHADER_WRITE = 0x20, 0x40
ACCESS_TRANSFER_READ, ACCESS_TRANSFER_WRITE, ACCESS_HOST_READ = 0x800, 0x1000, 0x2000

SETS_PER_POOL = 256
DESCRIPTORS_PER_POOL = 2048
#: How many queues of the compute family a device is opened with unless `open(queues=)` says (fewer where the
#: family has fewer; one with the validation layer on): each is a hardware channel a driver sets up at
#: vkCreateDevice, so not all of them.
DEFAULT_QUEUES = 4
#: Offer at least this many queues, the ones the family lacks sharing its VkQueues (submissions to one VkQueue
#: stay in order, which every fence wait allows): for tests of the multi-queue path on a one-queue device
#: (lavapipe).  0: offer only the family's own queues.
SHARED_QUEUES = 0

class DeviceState:
    """Handles and bookkeeping of one opened Vulkan device."""

    def __init__(self, binding: Binding, instance: Instance, physical: Any, info: PhysicalDeviceInfo,
                 *, memory_mode: str, staging_chunk_bytes: int, queues: int | None = None):
        from .memory import StagingRing

        self.binding = binding
        self.ffi, self.lib = ffi, lib = binding.ffi, binding.lib
        self.instance = instance
        self.physical = physical
        self.info = info
        self.lock = threading.RLock()
        self.closed = False
        self.handle: Any = None
        self.stats: Counter[str] = Counter()
        self.allocations: dict[int, Any] = {}
        self.descriptor_pools: list[Any] = []
        self.free_command_buffers: list[Any] = []
        self.pipelines: dict[int, Any] = {}  # id -> every PipelineState not yet destroyed
        #: Query pools of batch recordings and timeline semaphores of fences, destroyed with the device if still
        #: alive then (see batches.py).
        self.query_pools: set[Any] = set()
        self.semaphores: set[Any] = set()
        #: Extension entry points (vkGetDeviceProcAddr), and the allocation size of each external allocation.
        self.proc_cache: dict[str, Any] = {}
        self.export_sizes: dict[int, int] = {}
        #: What this driver's memory fds are (external.export_kind), learnt from one export on the first import.
        self.export_kind: tuple[int, int] | None = None
        self.limits = info.limits
        self.mapped = memory_mode == "mapped" or (memory_mode == "auto" and info.unified_memory)
        self.memory_mode = "mapped" if self.mapped else "staged"

        family = info.compute_family()
        if family is None:
            raise NotAvailable(BACKEND, f"{info.name} has no queue family with compute")
        self.family = family.index
        self.timestamp_bits = family.timestamp_bits
        #: Queues of the compute family made with the device: index 0 is the default queue, the others are
        #: handed out by `open_queue` (each with its own Timeline) and come back on `close_queue`.
        if queues is None:  # the layer's synchronization validation does not follow timeline semaphores from
            queues = 1 if instance.validation_layer else DEFAULT_QUEUES  # one queue to another: false hazards
        self.queue_count = max(1, min(family.count, queues))
        self.queue_limit = max(self.queue_count, SHARED_QUEUES)
        self.idle_queues = list(range(self.queue_limit - 1, 0, -1))
        self.queues: list[Timeline] = []
        api = self.api_version = min(info.api_version, instance.api_version)
        self._create_device(api)
        try:
            queue = ffi.new("VkQueue*")
            lib.vkGetDeviceQueue(self.handle, self.family, 0, queue)
            self.queue = queue[0]
            pool_info = ffi.new("VkCommandPoolCreateInfo*", {
                "sType": VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                "flags": VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                "queueFamilyIndex": self.family,
            })
            pool = ffi.new("VkCommandPool*")
            results.check("vkCreateCommandPool", lib.vkCreateCommandPool(self.handle, pool_info, ffi.NULL, pool))
            self.command_pool = pool[0]
            cache_info = ffi.new("VkPipelineCacheCreateInfo*", {"sType": VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO})
            cache = ffi.new("VkPipelineCache*")
            results.check("vkCreatePipelineCache", lib.vkCreatePipelineCache(self.handle, cache_info, ffi.NULL, cache))
            self.pipeline_cache = cache[0]
        except BaseException:
            lib.vkDestroyDevice(self.handle, ffi.NULL)
            raise
        self.timeline = Timeline(self)
        self.staging = StagingRing(self, staging_chunk_bytes)
        self.bindings: OrderedDict[Any, Any] = OrderedDict()  # dispatch cache, see dispatch.py
        self.bindings_of: dict[int, set[Any]] = {}  # allocation or pipeline-state id -> binding keys
        self._build_barriers()

    # -- creation -------------------------------------------------------------------------------------------

    def _create_device(self, api: int) -> None:
        ffi, lib = self.ffi, self.lib
        priority = ffi.new("float[]", [1.0] * self.queue_count)  # equal: Vulkan fixes them at creation
        queue_info = ffi.new("VkDeviceQueueCreateInfo*", {
            "sType": VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
            "queueFamilyIndex": self.family,
            "queueCount": self.queue_count,
            "pQueuePriorities": priority,
        })
        supported = {k: v for k, v in self.info.features.items() if v}
        enabled = {name for names in ENABLED_FEATURES.values() for name in names if name in supported}
        self.enabled_features = frozenset(enabled)
        wanted = [e for e in EXTENSIONS if e in self.info.extensions] if api >= (1 << 22 | 1 << 12) else []
        self.extensions = frozenset(wanted)
        names = [ffi.new("char[]", e.encode()) for e in wanted]
        name_array = ffi.new("char*[]", names or 1)
        info = ffi.new("VkDeviceCreateInfo*", {
            "sType": VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
            "queueCreateInfoCount": 1,
            "pQueueCreateInfos": queue_info,
            "enabledExtensionCount": len(wanted),
            "ppEnabledExtensionNames": name_array if wanted else ffi.NULL,
        })
        keep: Any = None
        if api >= (1 << 22 | 1 << 12):  # Vulkan 1.1: features through the pNext chain
            root, keep = feature_chain(self.binding, api, dict.fromkeys(enabled, True))
            info.pNext = root
        else:
            core = ffi.new("VkPhysicalDeviceFeatures*")
            for name in ENABLED_FEATURES["core"]:
                setattr(core, name, int(name in enabled))
            info.pEnabledFeatures = core
            keep = core
        out = ffi.new("VkDevice*")
        result = lib.vkCreateDevice(self.physical, info, ffi.NULL, out)
        del keep
        if result:
            results.raise_for("vkCreateDevice", result)
        self.handle = out[0]

    def _build_barriers(self) -> None:
        """The memory barriers that open and close every recorded command buffer.

        Each command buffer starts by waiting on the compute and transfer writes before it (and, being an
        execution dependency, on earlier reads), and ends by making its writes visible to the host and to
        later copies.  Access masks only name accesses of the stages in the same mask, as the spec demands.
        """
        ffi = self.ffi

        def barrier(src: int, dst: int) -> Any:
            return ffi.new("VkMemoryBarrier*", {"sType": VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                                "srcAccessMask": src, "dstAccessMask": dst})

        self.dispatch_before = barrier(ACCESS_SHADER_WRITE | ACCESS_TRANSFER_WRITE,
                                       ACCESS_SHADER_READ | ACCESS_SHADER_WRITE)
        self.dispatch_after = barrier(ACCESS_SHADER_WRITE, ACCESS_HOST_READ | ACCESS_TRANSFER_READ)
        self.copy_before = barrier(ACCESS_SHADER_WRITE | ACCESS_TRANSFER_WRITE,
                                   ACCESS_TRANSFER_READ | ACCESS_TRANSFER_WRITE)
        self.copy_after = barrier(ACCESS_TRANSFER_WRITE, ACCESS_HOST_READ | ACCESS_TRANSFER_READ | ACCESS_TRANSFER_WRITE
                                  | ACCESS_SHADER_READ | ACCESS_SHADER_WRITE)
        #: A recorded batch's commands keep only their "before" barriers (each orders against every earlier
        #: compute and transfer write); this one, at the batch's end, makes all its writes visible.
        self.batch_after = barrier(ACCESS_SHADER_WRITE | ACCESS_TRANSFER_WRITE, ACCESS_HOST_READ | ACCESS_TRANSFER_READ
                                   | ACCESS_TRANSFER_WRITE | ACCESS_SHADER_READ | ACCESS_SHADER_WRITE)
        self.begin_reusable = ffi.new("VkCommandBufferBeginInfo*", {
            "sType": VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            "flags": 0,  # not SIMULTANEOUS_USE: see dispatch.Command
        })
        self.copy_region = ffi.new("VkBufferCopy*")

    # -- memory ---------------------------------------------------------------------------------------------

    def create_allocation(self, nbytes: int, prefer: Sequence[tuple[int, int]], *, mapped: bool,
                          usage: int, op: str) -> Any:
        """A buffer with its own memory of the first preferred type; mapped persistently if `mapped`."""
        from .memory import Allocation, choose_memory_type

        ffi, lib, device = self.ffi, self.lib, self.handle
        capacity = (nbytes + 3) & ~3
        info = ffi.new("VkBufferCreateInfo*", {
            "sType": VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
            "size": capacity,
            "usage": usage,
            "sharingMode": VK_SHARING_MODE_EXCLUSIVE,
        })
        out = ffi.new("VkBuffer*")
        results.check("vkCreateBuffer", lib.vkCreateBuffer(device, info, ffi.NULL, out))
        buffer = out[0]
        memory = None
        try:
            req = ffi.new("VkMemoryRequirements*")
            lib.vkGetBufferMemoryRequirements(device, buffer, req)
            index = choose_memory_type(self.info, req.memoryTypeBits, prefer)
            if index is None:
                raise InvalidArgument(BACKEND, op, detail="no memory type fits a storage buffer here")
            alloc_info = ffi.new("VkMemoryAllocateInfo*", {
                "sType": VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                "allocationSize": req.size,
                "memoryTypeIndex": index,
            })
            mem = ffi.new("VkDeviceMemory*")
            result = lib.vkAllocateMemory(device, alloc_info, ffi.NULL, mem)
            if result:
                heap = self.info.memory_types[index].heap
                results.raise_for("vkAllocateMemory", result,
                                  f"{req.size} bytes from memory type {index} (heap {heap})")
            memory = mem[0]
            results.check("vkBindBufferMemory", lib.vkBindBufferMemory(device, buffer, memory, 0))
            view = None
            if mapped:
                ptr = ffi.new("void**")
                results.check("vkMapMemory", lib.vkMapMemory(device, memory, 0, capacity, 0, ptr))
                view = np.frombuffer(ffi.buffer(ptr[0], capacity), dtype=np.uint8)
        except BaseException:
            lib.vkDestroyBuffer(device, buffer, ffi.NULL)
            if memory is not None:
                lib.vkFreeMemory(device, memory, ffi.NULL)
            raise
        alloc = Allocation(next_id(), buffer, memory, nbytes, capacity, view)
        self.stats["memory_allocations"] += 1
        return alloc

    def destroy_allocation(self, alloc: Any) -> None:
        if alloc.buffer is None:
            return
        self.lib.vkDestroyBuffer(self.handle, alloc.buffer, self.ffi.NULL)
        self.lib.vkFreeMemory(self.handle, alloc.memory, self.ffi.NULL)  # unmaps implicitly
        self.export_sizes.pop(alloc.id, None)
        alloc.buffer = alloc.memory = alloc.view = None
        alloc.dead = True

    def release(self, alloc: Any) -> None:
        """Forget `alloc` now and free it once the work that uses it has finished."""
        if alloc.dead or self.closed:
            alloc.dead = True
            return
        alloc.dead = True
        self.allocations.pop(alloc.id, None)
        self.forget_bindings(alloc.id)
        self.after(alloc, lambda: self.destroy_allocation(alloc))

    # -- further queues -------------------------------------------------------------------------------------

    def open_queue(self) -> Timeline:
        """Another queue of the compute family (the caller checked that one is idle), with its own Timeline."""
        index = self.idle_queues.pop()
        out = self.ffi.new("VkQueue*")
        self.lib.vkGetDeviceQueue(self.handle, self.family, index % self.queue_count, out)
        timeline = Timeline(self, out[0])
        timeline.index = index
        self.queues.append(timeline)
        return timeline

    def close_queue(self, timeline: Timeline) -> None:
        """Give a queue back once its work has finished (its fences are destroyed, its deferred work run)."""
        if timeline not in self.queues:
            return
        timeline.wait(timeline.submitted)
        self.queues.remove(timeline)
        timeline.destroy()
        self.idle_queues.append(timeline.index)

    def after(self, obj: Any, action: Any) -> None:
        """Run `action` once every submission that used `obj` has finished: its last one on the default queue
        (`obj.last_serial`) and on each further queue (`obj.elsewhere`)."""
        pending = [(t, s) for t, s in getattr(obj, "elsewhere", {}).items() if s > t.completed]
        self.timeline.defer(obj.last_serial, _chain(pending, action))

    def after_all(self, action: Any) -> None:
        """Run `action` once everything submitted so far, on every queue, has finished."""
        pending = [(t, t.submitted) for t in self.queues if t.submitted > t.completed]
        self.timeline.defer(self.timeline.submitted, _chain(pending, action))

    def wait_idle_for(self, obj: Any) -> None:
        """Block until the further queues' submissions that used `obj` have finished (host access to it)."""
        for timeline, serial in list(getattr(obj, "elsewhere", {}).items()):
            if timeline in self.queues:
                timeline.wait(serial)

    # -- command buffers ------------------------------------------------------------------------------------

    def allocate_command_buffer(self) -> Any:
        if self.free_command_buffers:
            return self.free_command_buffers.pop()
        ffi = self.ffi
        info = ffi.new("VkCommandBufferAllocateInfo*", {
            "sType": VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
            "commandPool": self.command_pool,
            "level": 0,
            "commandBufferCount": 1,
        })
        out = ffi.new("VkCommandBuffer[1]")
        results.check("vkAllocateCommandBuffers", self.lib.vkAllocateCommandBuffers(self.handle, info, out))
        return out[0]

    def free_command_buffer(self, cmd: Any) -> None:
        """Give back a command buffer that is not pending; it is reset when next recorded."""
        self.free_command_buffers.append(cmd)

    def submit_info(self, cmd: Any) -> tuple[Any, Any]:
        """A prebuilt VkSubmitInfo* for one command buffer, and what keeps it alive."""
        ffi = self.ffi
        cmds = ffi.new("VkCommandBuffer[1]", [cmd])
        info = ffi.new("VkSubmitInfo*", {
            "sType": VK_STRUCTURE_TYPE_SUBMIT_INFO,
            "commandBufferCount": 1,
            "pCommandBuffers": cmds,
        })
        return info, cmds

    def record_copy(self, cmd: Any, src: Any, src_offset: int, dst: Any, dst_offset: int, size: int) -> None:
        """Record `cmd` (not pending) as: barrier, one buffer copy, barrier to host, transfer and shader."""
        ffi, lib = self.ffi, self.lib
        results.check("vkResetCommandBuffer", lib.vkResetCommandBuffer(cmd, 0))
        results.check("vkBeginCommandBuffer", lib.vkBeginCommandBuffer(cmd, self.begin_reusable))
        lib.vkCmdPipelineBarrier(cmd, STAGE_COMPUTE | STAGE_TRANSFER, STAGE_TRANSFER, 0,
                                 1, self.copy_before, 0, ffi.NULL, 0, ffi.NULL)
        region = self.copy_region
        region.srcOffset, region.dstOffset, region.size = src_offset, dst_offset, size
        lib.vkCmdCopyBuffer(cmd, src, dst, 1, region)
        lib.vkCmdPipelineBarrier(cmd, STAGE_TRANSFER, STAGE_HOST | STAGE_TRANSFER | STAGE_COMPUTE, 0,
                                 1, self.copy_after, 0, ffi.NULL, 0, ffi.NULL)
        results.check("vkEndCommandBuffer", lib.vkEndCommandBuffer(cmd))

    # -- descriptor sets ------------------------------------------------------------------------------------

    def allocate_descriptor_set(self, layout: Any) -> tuple[Any, Any]:
        """A descriptor set of `layout`, from the first pool with room; returns (set, pool)."""
        ffi, lib = self.ffi, self.lib
        layouts = ffi.new("VkDescriptorSetLayout[1]", [layout])
        out = ffi.new("VkDescriptorSet[1]")
        for pool in reversed(self.descriptor_pools):
            info = ffi.new("VkDescriptorSetAllocateInfo*", {
                "sType": 34, "descriptorPool": pool, "descriptorSetCount": 1, "pSetLayouts": layouts})
            result = lib.vkAllocateDescriptorSets(self.handle, info, out)
            if result == results.VK_SUCCESS:
                return out[0], pool
            if result not in (results.VK_ERROR_OUT_OF_POOL_MEMORY, results.VK_ERROR_FRAGMENTED_POOL):
                results.raise_for("vkAllocateDescriptorSets", result)
        pool = self._create_descriptor_pool()
        info = ffi.new("VkDescriptorSetAllocateInfo*", {
            "sType": 34, "descriptorPool": pool, "descriptorSetCount": 1, "pSetLayouts": layouts})
        results.check("vkAllocateDescriptorSets", lib.vkAllocateDescriptorSets(self.handle, info, out))
        return out[0], pool

    def _create_descriptor_pool(self) -> Any:
        ffi = self.ffi
        sizes = ffi.new("VkDescriptorPoolSize[1]", [{"type": VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                     "descriptorCount": DESCRIPTORS_PER_POOL}])
        info = ffi.new("VkDescriptorPoolCreateInfo*", {
            "sType": VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
            "flags": VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT,
            "maxSets": SETS_PER_POOL,
            "poolSizeCount": 1,
            "pPoolSizes": sizes,
        })
        out = ffi.new("VkDescriptorPool*")
        results.check("vkCreateDescriptorPool", self.lib.vkCreateDescriptorPool(self.handle, info, ffi.NULL, out))
        self.descriptor_pools.append(out[0])
        return out[0]

    def free_descriptor_set(self, descriptor_set: Any, pool: Any) -> None:
        sets = self.ffi.new("VkDescriptorSet[1]", [descriptor_set])
        self.lib.vkFreeDescriptorSets(self.handle, pool, 1, sets)

    # -- dispatch cache bookkeeping (the cache itself is in dispatch.py) ------------------------------------

    def forget_bindings(self, owner_id: int) -> None:
        """Drop every cached descriptor set and command that uses the allocation or pipeline `owner_id`."""
        for key in self.bindings_of.pop(owner_id, ()):
            entry = self.bindings.pop(key, None)
            if entry is None:
                continue
            entry.retire(self)
            for other in key:
                keys = self.bindings_of.get(other)
                if keys is not None:
                    keys.discard(key)

    # -- teardown -------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for the queue, destroy everything this device created, then the instance; idempotent."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            ffi, lib, device = self.ffi, self.lib, self.handle
            try:
                lib.vkDeviceWaitIdle(device)
            finally:
                self.timeline.destroy()
                for timeline in self.queues:  # after the default one: its deferred work may chain onto these
                    timeline.destroy()
                self.queues.clear()
                for entry in self.bindings.values():
                    entry.retire(self)
                self.bindings.clear()
                self.bindings_of.clear()
                for state in list(self.pipelines.values()):
                    state.destroy(self)
                self.pipelines.clear()
                self.staging.destroy()
                for alloc in list(self.allocations.values()):
                    self.destroy_allocation(alloc)
                self.allocations.clear()
                for pool in self.descriptor_pools:
                    lib.vkDestroyDescriptorPool(device, pool, ffi.NULL)
                self.descriptor_pools.clear()
                for pool in self.query_pools:
                    lib.vkDestroyQueryPool(device, pool, ffi.NULL)
                self.query_pools.clear()
                for semaphore in self.semaphores:
                    lib.vkDestroySemaphore(device, semaphore, ffi.NULL)
                self.semaphores.clear()
                lib.vkDestroyCommandPool(device, self.command_pool, ffi.NULL)  # frees its command buffers
                self.free_command_buffers.clear()
                lib.vkDestroyPipelineCache(device, self.pipeline_cache, ffi.NULL)
                lib.vkDestroyDevice(device, ffi.NULL)
                self.handle = None
                self.instance.close()



def _chain(pending: list[tuple[Timeline, int]], action: Any) -> Any:
    """`action`, run only after each (timeline, serial) of `pending` has finished, one after the other."""
    if not pending:
        return action
    (timeline, serial), rest = pending[0], pending[1:]
    return lambda: timeline.defer(serial, _chain(rest, action))
