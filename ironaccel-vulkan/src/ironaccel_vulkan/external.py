"""External memory and semaphores as opaque fds (VK_KHR_external_memory_fd, VK_KHR_external_semaphore_fd).

Exportable memory is a dedicated allocation (what CUDA's cuImportExternalMemory and another Vulkan device
expect of a buffer); an import asks for a dedicated one where the exporter says so.  A successful import
owns the fd (Vulkan closes it with the memory or semaphore); a failed one leaves it to the caller.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Any

from ironaccel.errors import InvalidArgument

from . import results
from .binding import BACKEND
from .memory import BUFFER_USAGE, PREFER_DEVICE_LOCAL, Allocation, choose_memory_type, next_id
from .physical import MEMORY_HOST_VISIBLE, TYPE_CPU

if TYPE_CHECKING:
    from .state import DeviceState

__all__ = ["EXTENSIONS", "create_exportable", "export_memory", "import_memory", "export_semaphore",
           "import_semaphore", "check_fd"]

MEMORY_FD, SEMAPHORE_FD = "VK_KHR_external_memory_fd", "VK_KHR_external_semaphore_fd"
#: The device extensions this module uses, enabled where the device has them (Vulkan 1.1 or later).
EXTENSIONS = (MEMORY_FD, SEMAPHORE_FD)
OPAQUE_FD = 0x1
ST_BUFFER_CREATE_INFO, ST_MEMORY_ALLOCATE_INFO = 12, 5
ST_EXTERNAL_MEMORY_BUFFER_CREATE_INFO = 1000072000
ST_EXPORT_MEMORY_ALLOCATE_INFO = 1000072002
ST_MEMORY_DEDICATED_ALLOCATE_INFO = 1000127001
ST_MEMORY_GET_FD_INFO = 1000074002
ST_IMPORT_MEMORY_FD_INFO = 1000074000
ST_EXPORT_SEMAPHORE_CREATE_INFO = 1000077000
ST_SEMAPHORE_GET_FD_INFO = 1000079001
ST_IMPORT_SEMAPHORE_FD_INFO = 1000079000


_NOT_EXPORTED = {stat.S_IFIFO: "a pipe", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory"}
#: An import the driver refuses with one of these says the fd is not what the ExternalMemory claims.
_REFUSED = (-1000072003, -2, -1)  # VK_ERROR_INVALID_EXTERNAL_HANDLE, out of device / host memory


def check_fd(core: DeviceState, fd: int, size: int | None, op: str) -> None:
    """Refuse an fd no Vulkan driver exports before a driver sees it: a driver may block reading it (Mesa's
    lavapipe reads a header from a memory fd, which waits forever on an empty pipe).  Memory (`size` given) of
    a CPU device (lavapipe) is a memfd; where the fd is a regular file it must hold `size` bytes."""
    st = os.fstat(fd)
    kind = stat.S_IFMT(st.st_mode)
    what = _NOT_EXPORTED.get(kind) or ("a terminal" if os.isatty(fd) else None)
    if what is None and size is not None and core.info.device_type == TYPE_CPU and kind != stat.S_IFREG:
        what = "not a memfd (the only kind of memory fd this CPU device exports)"
    if what is None and size is not None and core.info.device_type != TYPE_CPU and foreign(st, export_kind(core)):
        # NVIDIA's driver 580, refusing a memfd or /dev/null as memory, fails every later vkAllocateMemory of the
        # process (OUT_OF_DEVICE_MEMORY): such an fd never reaches it.  Its own exports are /dev/nvidiactl.
        what = "not of the kind this driver exports as memory"
    if what is not None:
        raise InvalidArgument(BACKEND, op, detail=f"the fd is {what}, not one a Vulkan driver exported")
    if size is not None and kind == stat.S_IFREG and 0 < st.st_size < size:
        raise InvalidArgument(BACKEND, op, detail=f"the fd holds {st.st_size} bytes, fewer than the {size} the "
                              "ExternalMemory says")


def _kind(st: os.stat_result) -> tuple[int, int]:
    """An fd's file type and the device it names (a character device) or lives on (a file)."""
    kind = stat.S_IFMT(st.st_mode)
    return kind, st.st_rdev if kind in (stat.S_IFCHR, stat.S_IFBLK) else st.st_dev


def foreign(st: os.stat_result, exported: tuple[int, int]) -> bool:
    """Whether an fd (its fstat) is surely not a memory export of a driver whose exports are of kind `exported`:
    a regular file (a memfd) where the driver's are not, or a device file of another driver (another major
    number).  Anything else (an anonymous inode ...) is left for the driver to judge."""
    kind, ref_kind = stat.S_IFMT(st.st_mode), exported[0]
    devices = (stat.S_IFCHR, stat.S_IFBLK)
    if kind in devices:
        return ref_kind not in devices or os.major(st.st_rdev) != os.major(exported[1])
    return kind == stat.S_IFREG and ref_kind != stat.S_IFREG


def export_kind(core: DeviceState) -> tuple[int, int]:
    """The kind (`_kind`) of this device's memory fds, from one export of a small buffer (once per device)."""
    if core.export_kind is None:
        alloc = _allocate(core, 4, PREFER_DEVICE_LOCAL, False, "import_memory")
        try:
            fd = export_memory(core, alloc)[0]
            try:
                core.export_kind = _kind(os.fstat(fd))
            finally:
                os.close(fd)
        finally:
            core.destroy_allocation(alloc)
    return core.export_kind


def _proc(core: DeviceState, name: str) -> Any:
    found = core.proc_cache.get(name)
    if found is None:
        raw = core.lib.vkGetDeviceProcAddr(core.handle, name.encode())
        if raw == core.ffi.NULL:
            raise InvalidArgument(BACKEND, name, detail=f"the driver has no {name}")
        found = core.proc_cache[name] = core.ffi.cast(f"PFN_{name}", raw)
    return found


def _allocate(core: DeviceState, nbytes: int, prefer: Any, mapped: bool, op: str,
              import_fd: int | None = None, import_size: int = 0, dedicated: bool = True) -> Allocation:
    """A buffer with external-memory info and its dedicated memory, exportable or imported from `import_fd`."""
    ffi, lib, device = core.ffi, core.lib, core.handle
    capacity = (nbytes + 3) & ~3
    if import_fd is not None and dedicated:  # a dedicated import's buffer must span the whole allocation
        capacity = max(capacity, import_size)
    external = ffi.new("VkExternalMemoryBufferCreateInfo*", {"sType": ST_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
                                                             "handleTypes": OPAQUE_FD})
    info = ffi.new("VkBufferCreateInfo*", {"sType": ST_BUFFER_CREATE_INFO, "pNext": external, "size": capacity,
                                           "usage": BUFFER_USAGE, "sharingMode": 0})
    out = ffi.new("VkBuffer*")
    results.check("vkCreateBuffer", lib.vkCreateBuffer(device, info, ffi.NULL, out))
    buffer, memory = out[0], None
    try:
        req = ffi.new("VkMemoryRequirements*")
        lib.vkGetBufferMemoryRequirements(device, buffer, req)
        index = choose_memory_type(core.info, req.memoryTypeBits, prefer)
        if index is None:
            raise InvalidArgument(BACKEND, op, detail="no memory type fits an external storage buffer here")
        dedicated_info = ffi.new("VkMemoryDedicatedAllocateInfo*", {"sType": ST_MEMORY_DEDICATED_ALLOCATE_INFO,
                                                                    "buffer": buffer})
        if import_fd is None:
            chain = ffi.new("VkExportMemoryAllocateInfo*", {"sType": ST_EXPORT_MEMORY_ALLOCATE_INFO,
                                                            "pNext": dedicated_info, "handleTypes": OPAQUE_FD})
            size = req.size
        else:
            if import_size < req.size:
                raise InvalidArgument(BACKEND, op, detail=f"the exported memory holds {import_size} bytes; a "
                                      f"buffer of {nbytes} bytes needs {req.size} here")
            chain = ffi.new("VkImportMemoryFdInfoKHR*", {"sType": ST_IMPORT_MEMORY_FD_INFO,
                                                         "pNext": dedicated_info if dedicated else ffi.NULL,
                                                         "handleType": OPAQUE_FD, "fd": import_fd})
            size = import_size
        alloc_info = ffi.new("VkMemoryAllocateInfo*", {"sType": ST_MEMORY_ALLOCATE_INFO, "pNext": chain,
                                                       "allocationSize": size, "memoryTypeIndex": index})
        mem = ffi.new("VkDeviceMemory*")
        result = lib.vkAllocateMemory(device, alloc_info, ffi.NULL, mem)
        if result and import_fd is not None and result in _REFUSED:
            raise InvalidArgument(BACKEND, op, detail=f"the driver refused the fd ({results.result_name(result)} "
                                  f"from vkAllocateMemory): not memory of {size} bytes exported by a Vulkan driver "
                                  "of this kind of device")
        if result:
            results.raise_for("vkAllocateMemory", result, f"{'import of' if import_fd is not None else 'exportable'}"
                              f" {size} bytes (opaque fd)")
        memory = mem[0]
        results.check("vkBindBufferMemory", lib.vkBindBufferMemory(device, buffer, memory, 0))
        view = None
        if mapped and core.info.memory_types[index].flags & MEMORY_HOST_VISIBLE:
            import numpy as np

            ptr = ffi.new("void**")
            results.check("vkMapMemory", lib.vkMapMemory(device, memory, 0, capacity, 0, ptr))
            view = np.frombuffer(ffi.buffer(ptr[0], capacity), dtype=np.uint8)
    except BaseException:
        lib.vkDestroyBuffer(device, buffer, ffi.NULL)
        if memory is not None:
            lib.vkFreeMemory(device, memory, ffi.NULL)
        raise
    alloc = Allocation(next_id(), buffer, memory, nbytes, capacity, view)
    core.export_sizes[alloc.id] = int(size)
    core.stats["memory_allocations"] += 1
    return alloc


def create_exportable(core: DeviceState, nbytes: int, prefer: Any, *, mapped: bool) -> Allocation:
    return _allocate(core, nbytes, prefer, mapped, "alloc")


def export_memory(core: DeviceState, alloc: Allocation) -> tuple[int, int, bool]:
    """(fd, allocation size, dedicated) of exportable memory; the caller owns the fd."""
    ffi = core.ffi
    info = ffi.new("VkMemoryGetFdInfoKHR*", {"sType": ST_MEMORY_GET_FD_INFO, "memory": alloc.memory,
                                             "handleType": OPAQUE_FD})
    fd = ffi.new("int*")
    results.check("vkGetMemoryFdKHR", _proc(core, "vkGetMemoryFdKHR")(core.handle, info, fd))
    return int(fd[0]), core.export_sizes[alloc.id], True


def import_memory(core: DeviceState, fd: int, nbytes: int, size: int, dedicated: bool, mapped: bool) -> Allocation:
    """A buffer of `nbytes` over exported memory of `size` bytes (owns `fd` on success)."""
    check_fd(core, fd, size, "import_memory")
    return _allocate(core, nbytes, PREFER_DEVICE_LOCAL, mapped, "import_memory", fd, size, dedicated)


def export_semaphore(core: DeviceState, semaphore: Any) -> int:
    ffi = core.ffi
    info = ffi.new("VkSemaphoreGetFdInfoKHR*", {"sType": ST_SEMAPHORE_GET_FD_INFO, "semaphore": semaphore,
                                                "handleType": OPAQUE_FD})
    fd = ffi.new("int*")
    results.check("vkGetSemaphoreFdKHR", _proc(core, "vkGetSemaphoreFdKHR")(core.handle, info, fd))
    return int(fd[0])


def import_semaphore(core: DeviceState, semaphore: Any, fd: int) -> None:
    """Make `semaphore` (a timeline semaphore of this device) the payload of `fd` (owned by Vulkan on success)."""
    check_fd(core, fd, None, "import_fence")
    ffi = core.ffi
    info = ffi.new("VkImportSemaphoreFdInfoKHR*", {"sType": ST_IMPORT_SEMAPHORE_FD_INFO, "semaphore": semaphore,
                                                   "flags": 0, "handleType": OPAQUE_FD, "fd": fd})
    result = _proc(core, "vkImportSemaphoreFdKHR")(core.handle, info)
    if result in _REFUSED:
        name = results.result_name(result)
        raise InvalidArgument(BACKEND, "import_fence", detail=f"the driver refused the fd ({name} from "
                              "vkImportSemaphoreFdKHR): not a timeline semaphore exported by a Vulkan driver of this "
                              "kind of device")
    results.check("vkImportSemaphoreFdKHR", result)
