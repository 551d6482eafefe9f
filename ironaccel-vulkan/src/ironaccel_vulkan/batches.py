"""The execution model's Vulkan calls: command batches, timestamps and timeline-semaphore fences.

A batch is recorded into one VkCommandBuffer (SIMULTANEOUS_USE, so it can be
re-submitted while a previous submission runs, on any queue of the family)
with a descriptor set per distinct (pipeline, buffers) of its dispatches, a
host-visible staging buffer per write and per read, and a timestamp query
pair per command where the batch is timed.  Each command is preceded by one
pipeline barrier (after every earlier compute and transfer write, so the batch
runs in order) and the batch ends with one that makes its writes visible to
the host and later work: one barrier per command, where a plain dispatch
records two.  Each submit is one `vkQueueSubmit` on the timeline of the queue it goes to.  Fences are timeline
semaphores (Vulkan 1.2 `timelineSemaphore`): a signal or wait without work
is a submit of no command buffers and no VkFence (nothing to retire).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ironaccel.compute.execution import Command

from . import results
from .dispatch import SHADER_STAGE_COMPUTE, VK_PIPELINE_BIND_POINT_COMPUTE, WHOLE_SIZE
from .memory import PREFER_HOST, STAGING_USAGE, copy_bytes
from .state import STAGE_COMPUTE, STAGE_HOST, STAGE_TRANSFER, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER

if TYPE_CHECKING:
    from .state import DeviceState
    from .submission import Timeline

__all__ = ["Recording", "record", "submit", "dispatch_on", "finish", "timings", "free", "queue_op"]

SIMULTANEOUS_USE = 0x4
QUERY_TYPE_TIMESTAMP = 2
STAGE_ALL_COMMANDS = 0x10000
QUERY_RESULT_64, QUERY_RESULT_WAIT = 0x1, 0x2
SEMAPHORE_TYPE_TIMELINE = 1
ST_SUBMIT_INFO = 4
ST_SEMAPHORE_CREATE_INFO = 9
ST_QUERY_POOL_CREATE_INFO = 11
ST_SEMAPHORE_TYPE_CREATE_INFO = 1000207002
ST_TIMELINE_SEMAPHORE_SUBMIT_INFO = 1000207003
ST_SEMAPHORE_WAIT_INFO = 1000207004
NO_TIMEOUT = 0xFFFFFFFFFFFFFFFF


class Recording:
    """One batch's command buffer, its descriptor sets, staging buffers and query pool."""

    __slots__ = ("cmd", "sets", "staging", "queries", "count", "last_serial", "elsewhere", "spans", "allocs",
                 "programs", "plain")

    def __init__(self, cmd: Any):
        self.cmd = cmd
        self.sets: list[tuple[Any, Any]] = []
        self.staging: dict[int, Any] = {}  # command index -> staging Allocation (writes and reads)
        self.queries: Any = None
        self.count = 0
        self.last_serial = 0
        self.elsewhere: dict[Any, int] = {}  # further queues' Timelines -> the serial of the last submit there
        self.spans: dict[int, list[tuple[float, float]]] = {}
        #: The distinct allocations and pipelines the commands use (marked at each submit), and the prebuilt
        #: VkSubmitInfo of a submit that waits for and signals no fence (with what keeps it alive).
        self.allocs: tuple[Any, ...] = ()
        self.programs: tuple[Any, ...] = ()
        self.plain: Any = None


def record(core: DeviceState, commands: Sequence[Command], timestamps: bool) -> Recording:
    """Record `commands` into a new command buffer (freed again if recording fails)."""
    ffi, lib = core.ffi, core.lib
    rec = Recording(core.allocate_command_buffer())
    try:
        rec.count = len(commands)
        if timestamps:
            info = ffi.new("VkQueryPoolCreateInfo*", {"sType": ST_QUERY_POOL_CREATE_INFO,
                                                      "queryType": QUERY_TYPE_TIMESTAMP,
                                                      "queryCount": 2 * len(commands)})
            out = ffi.new("VkQueryPool*")
            results.check("vkCreateQueryPool", lib.vkCreateQueryPool(core.handle, info, ffi.NULL, out))
            rec.queries = out[0]
            core.query_pools.add(rec.queries)
        for command in commands:
            if command.kind in ("write", "read"):
                alloc = core.create_allocation(command.nbytes, PREFER_HOST, mapped=True, usage=STAGING_USAGE,
                                               op="batch")
                rec.staging[command.index] = alloc
                core.allocations[alloc.id] = alloc
                if command.kind == "write":
                    copy_bytes(alloc.view[: command.nbytes], command.data)  # type: ignore[arg-type]
        begin = ffi.new("VkCommandBufferBeginInfo*", {"sType": 42, "flags": SIMULTANEOUS_USE})
        cmd = rec.cmd
        shared: dict[Any, Any] = {}  # the descriptor set of each (pipeline, buffers) recorded so far
        results.check("vkResetCommandBuffer", lib.vkResetCommandBuffer(cmd, 0))
        results.check("vkBeginCommandBuffer", lib.vkBeginCommandBuffer(cmd, begin))
        if rec.queries is not None:
            lib.vkCmdResetQueryPool(cmd, rec.queries, 0, 2 * len(commands))
        for command in commands:
            if rec.queries is not None:
                lib.vkCmdWriteTimestamp(cmd, STAGE_ALL_COMMANDS, rec.queries, 2 * command.index)
            _record_one(core, rec, command, shared)
            if rec.queries is not None:
                lib.vkCmdWriteTimestamp(cmd, STAGE_ALL_COMMANDS, rec.queries, 2 * command.index + 1)
        if commands:
            lib.vkCmdPipelineBarrier(cmd, STAGE_COMPUTE | STAGE_TRANSFER, STAGE_HOST | STAGE_TRANSFER | STAGE_COMPUTE,
                                     0, 1, core.batch_after, 0, ffi.NULL, 0, ffi.NULL)
        results.check("vkEndCommandBuffer", lib.vkEndCommandBuffer(cmd))
    except BaseException:
        free(core, rec)
        raise
    rec.allocs = tuple({id(a): a for c in commands for a in (*c.handles, c.src, c.dst) if a is not None}.values())
    rec.programs = tuple({id(c.program): c.program for c in commands if c.program is not None}.values())
    cmds = ffi.new("VkCommandBuffer[1]", [rec.cmd])
    rec.plain = (submit_info(core, cmds, [], [], []), cmds)
    core.stats["commands_recorded"] += 1
    return rec


def _record_one(core: DeviceState, rec: Recording, command: Command, shared: dict[Any, Any]) -> None:
    ffi, lib, cmd = core.ffi, core.lib, rec.cmd
    copy_stages = STAGE_COMPUTE | STAGE_TRANSFER
    if command.kind == "dispatch":
        program = command.program
        lib.vkCmdPipelineBarrier(cmd, copy_stages, STAGE_COMPUTE, 0, 1, core.dispatch_before, 0, ffi.NULL, 0,
                                 ffi.NULL)
        lib.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, program.pipeline)
        if command.handles:
            handles = command.handles
            key = (program.id, *(a.id for a in handles))
            descriptor_set = shared.get(key)
            if descriptor_set is None:  # one set per (pipeline, buffers) in a recording, written once
                descriptor_set, pool = core.allocate_descriptor_set(program.set_layout)
                rec.sets.append((descriptor_set, pool))
                shared[key] = descriptor_set
                infos = ffi.new("VkDescriptorBufferInfo[]", [{"buffer": a.buffer, "offset": 0,
                                                              "range": WHOLE_SIZE} for a in handles])
                writes = ffi.new("VkWriteDescriptorSet[]", [
                    {"sType": 35, "dstSet": descriptor_set, "dstBinding": i, "descriptorCount": 1,
                     "descriptorType": VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "pBufferInfo": infos + i}
                    for i in range(len(handles))])
                lib.vkUpdateDescriptorSets(core.handle, len(handles), writes, 0, ffi.NULL)
            sets = ffi.new("VkDescriptorSet[1]", [descriptor_set])
            lib.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, program.layout, 0, 1, sets, 0, ffi.NULL)
        push = bytes(command.params)
        if push:
            lib.vkCmdPushConstants(cmd, program.layout, SHADER_STAGE_COMPUTE, 0, len(push), ffi.from_buffer(push))
        lib.vkCmdDispatch(cmd, *command.dims)
        return
    lib.vkCmdPipelineBarrier(cmd, copy_stages, STAGE_TRANSFER, 0, 1, core.copy_before, 0, ffi.NULL, 0, ffi.NULL)
    region = ffi.new("VkBufferCopy*")
    region.size = command.nbytes
    if command.kind == "copy":
        region.srcOffset, region.dstOffset = command.src_offset, command.dst_offset
        lib.vkCmdCopyBuffer(cmd, command.src.buffer, command.dst.buffer, 1, region)
    elif command.kind == "fill":
        lib.vkCmdFillBuffer(cmd, command.dst.buffer, command.offset, command.nbytes, command.word)
    elif command.kind == "write":
        region.dstOffset = command.offset
        lib.vkCmdCopyBuffer(cmd, rec.staging[command.index].buffer, command.dst.buffer, 1, region)
    else:
        region.srcOffset = command.offset
        lib.vkCmdCopyBuffer(cmd, command.src.buffer, rec.staging[command.index].buffer, 1, region)


def update(rec: Recording, command: Command) -> bool:
    """Patch a recording in place where Vulkan allows it: a write's new data goes into its staging buffer and a
    read's new `out` is read at finish; a dispatch, copy or fill has its arguments in the command buffer and is
    re-recorded (False).  The kit has waited for the recording's last submission."""
    if command.kind == "write":
        copy_bytes(rec.staging[command.index].view[: command.nbytes], command.data)  # type: ignore[arg-type]
        return True
    return command.kind == "read"


def submit_info(core: DeviceState, cmds: Any, waits: list[tuple[Any, int]],
                signals: list[tuple[Any, int]], keep: list[Any]) -> Any:
    """A VkSubmitInfo of `cmds` (a VkCommandBuffer[1] or None) that waits for and signals timeline values."""
    ffi = core.ffi
    info = ffi.new("VkSubmitInfo*", {"sType": ST_SUBMIT_INFO})
    if cmds is not None:
        info.commandBufferCount, info.pCommandBuffers = 1, cmds
    if waits or signals:
        wait_sems = ffi.new("VkSemaphore[]", [s for s, _ in waits] or 1)
        wait_values = ffi.new("uint64_t[]", [v for _, v in waits] or 1)
        stages = ffi.new("VkPipelineStageFlags[]", [STAGE_ALL_COMMANDS] * (len(waits) or 1))
        signal_sems = ffi.new("VkSemaphore[]", [s for s, _ in signals] or 1)
        signal_values = ffi.new("uint64_t[]", [v for _, v in signals] or 1)
        timeline = ffi.new("VkTimelineSemaphoreSubmitInfo*", {
            "sType": ST_TIMELINE_SEMAPHORE_SUBMIT_INFO,
            "waitSemaphoreValueCount": len(waits), "pWaitSemaphoreValues": wait_values,
            "signalSemaphoreValueCount": len(signals), "pSignalSemaphoreValues": signal_values})
        info.pNext = timeline
        info.waitSemaphoreCount, info.pWaitSemaphores, info.pWaitDstStageMask = len(waits), wait_sems, stages
        info.signalSemaphoreCount, info.pSignalSemaphores = len(signals), signal_sems
        keep.extend((wait_sems, wait_values, stages, signal_sems, signal_values, timeline))
    return info


def submit(core: DeviceState, rec: Recording, commands: Sequence[Command], waits: list[tuple[Any, int]],
           signals: list[tuple[Any, int]], timeline: Timeline | None = None) -> int:
    """One vkQueueSubmit of the recording on `timeline`'s queue (the default queue's if None); returns its serial
    there.  What the recording uses is marked used up to that serial, so it is freed and read only after it.
    (`commands` are those recorded: a write's or read's update changes no buffer, anything else re-records.)"""
    keep: list[Any] = []
    if waits or signals:
        cmds = core.ffi.new("VkCommandBuffer[1]", [rec.cmd])
        keep.append(cmds)  # alive until the call returns, with what submit_info keeps
        info = submit_info(core, cmds, waits, signals, keep)
    else:
        info = rec.plain[0]
    if timeline is None or timeline is core.timeline:
        serial = core.timeline.submit(info)
        rec.last_serial = serial
        for alloc in rec.allocs:
            alloc.last_serial = serial
        for program in rec.programs:
            program.last_serial = serial
        return serial
    timeline.poll()  # run what earlier work there held back, if it has finished
    pending = max((alloc.last_serial for alloc in rec.allocs), default=0)
    if pending > core.timeline.completed:  # the default queue's work on these buffers (an upload, a write) first:
        core.timeline.wait(pending)  # what every call but a dispatch or submit on a queue is ordered on
    serial = timeline.submit(info)
    rec.elsewhere[timeline] = serial
    for alloc in rec.allocs:
        alloc.elsewhere[timeline] = serial
    for program in rec.programs:
        program.elsewhere[timeline] = serial
    return serial


def dispatch_on(core: DeviceState, timeline: Timeline, program: Any, handles: list[Any], dims: tuple[int, int, int],
                params: bytes) -> int:
    """One dispatch on a further queue: recorded into a command buffer of its own, submitted once, and freed
    when it has finished (the default queue's dispatch cache is for the default queue alone)."""
    command = Command(None, 0, "dispatch")  # type: ignore[arg-type]  # a command of no batch
    command.program, command.handles, command.dims, command.params = program, list(handles), dims, params
    rec = record(core, [command], False)
    try:
        return submit(core, rec, [command], [], [], timeline)
    finally:
        free(core, rec)


def finish(core: DeviceState, rec: Recording, commands: Sequence[Command], serial: int) -> None:
    """Deliver the reads of a finished submission, and read its timestamps."""
    for command in commands:
        if command.kind == "read" and command.out is not None:
            copy_bytes(command.out, rec.staging[command.index].view[: command.nbytes])
    if rec.queries is not None:
        ffi, lib = core.ffi, core.lib
        data = ffi.new("uint64_t[]", 2 * rec.count)
        results.check("vkGetQueryPoolResults", lib.vkGetQueryPoolResults(
            core.handle, rec.queries, 0, 2 * rec.count, 16 * rec.count, data, 8, QUERY_RESULT_64 | QUERY_RESULT_WAIT))
        period = core.limits["timestamp_period_ns"]
        mask = (1 << core.timestamp_bits) - 1 if core.timestamp_bits < 64 else NO_TIMEOUT
        rec.spans[serial] = [((data[2 * i] & mask) * period, (data[2 * i + 1] & mask) * period)
                             for i in range(rec.count)]


def timings(rec: Recording, serial: int) -> list[tuple[float, float]]:
    return rec.spans.pop(serial, [])


def free(core: DeviceState, rec: Recording) -> None:
    """Give back the recording's objects once its last submission has finished."""
    def release() -> None:
        if core.handle is None:
            return
        core.free_command_buffer(rec.cmd)
        for descriptor_set, pool in rec.sets:
            core.free_descriptor_set(descriptor_set, pool)
        for alloc in rec.staging.values():
            core.allocations.pop(alloc.id, None)
            core.destroy_allocation(alloc)
        if rec.queries is not None:
            core.query_pools.discard(rec.queries)
            core.lib.vkDestroyQueryPool(core.handle, rec.queries, core.ffi.NULL)
        rec.sets, rec.staging, rec.queries = [], {}, None

    core.after(rec, release)


# -- timeline-semaphore fences ------------------------------------------------------------------------------

def create_semaphore(core: DeviceState, value: int, exportable: bool = False) -> Any:
    """A timeline semaphore at `value`; `exportable` as an opaque fd (VK_KHR_external_semaphore_fd)."""
    ffi = core.ffi
    export = ffi.new("VkExportSemaphoreCreateInfo*", {"sType": 1000077000, "handleTypes": 0x1}) if exportable \
        else ffi.NULL
    kind = ffi.new("VkSemaphoreTypeCreateInfo*", {"sType": ST_SEMAPHORE_TYPE_CREATE_INFO, "pNext": export,
                                                  "semaphoreType": SEMAPHORE_TYPE_TIMELINE, "initialValue": value})
    info = ffi.new("VkSemaphoreCreateInfo*", {"sType": ST_SEMAPHORE_CREATE_INFO, "pNext": kind})
    out = ffi.new("VkSemaphore*")
    results.check("vkCreateSemaphore", core.lib.vkCreateSemaphore(core.handle, info, ffi.NULL, out))
    core.semaphores.add(out[0])
    return out[0]


def semaphore_value(core: DeviceState, semaphore: Any) -> int:
    out = core.ffi.new("uint64_t*")
    results.check("vkGetSemaphoreCounterValue", core.lib.vkGetSemaphoreCounterValue(core.handle, semaphore, out))
    return int(out[0])


def semaphore_wait(core: DeviceState, semaphore: Any, value: int, seconds: float | None) -> bool:
    ffi = core.ffi
    sems = ffi.new("VkSemaphore[1]", [semaphore])
    values = ffi.new("uint64_t[1]", [value])
    info = ffi.new("VkSemaphoreWaitInfo*", {"sType": ST_SEMAPHORE_WAIT_INFO, "semaphoreCount": 1,
                                            "pSemaphores": sems, "pValues": values})
    ns = NO_TIMEOUT if seconds is None else min(max(0, int(seconds * 1e9)), NO_TIMEOUT - 1)
    result = core.lib.vkWaitSemaphores(core.handle, info, ns)
    if result == results.VK_TIMEOUT:
        return False
    results.check("vkWaitSemaphores", result)
    return True


def queue_op(core: DeviceState, waits: list[tuple[Any, int]], signals: list[tuple[Any, int]],
             timeline: Timeline | None = None) -> None:
    """A wait or signal on a queue (`timeline`'s, the default one if None) with no work: an unfenced submit of no
    command buffers."""
    keep: list[Any] = []
    (timeline or core.timeline).submit(submit_info(core, None, waits, signals, keep), fenced=False)
