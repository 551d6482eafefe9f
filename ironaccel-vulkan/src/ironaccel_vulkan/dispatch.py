"""Dispatch without rebuilding: descriptor sets and command buffers, cached and reused.

A `BindingSet` is one descriptor set, written once, for one pipeline and one
tuple of buffers.  Under it, each distinct (workgroup counts, params) gets a
`Command`: a command buffer recorded once with
    barrier; bind pipeline; bind set; push constants; dispatch; barrier
and a prebuilt VkSubmitInfo, so a repeated dispatch is one `vkQueueSubmit`.
A command buffer that is still pending is not submitted again: an identical
dispatch right behind it takes another recording of the same command.  Both
levels are LRU-bounded; entries that are evicted, or whose buffer or pipeline
is released, are freed once their last submission has finished.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from ironaccel.errors import InvalidArgument

from . import results
from .binding import BACKEND
from .state import STAGE_COMPUTE, STAGE_HOST, STAGE_TRANSFER, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER

if TYPE_CHECKING:
    from .pipeline import PipelineState
    from .state import DeviceState

__all__ = ["submit", "MAX_BINDING_SETS", "MAX_COMMANDS_PER_SET"]

MAX_BINDING_SETS = 512
MAX_COMMANDS_PER_SET = 16
VK_PIPELINE_BIND_POINT_COMPUTE = 1
SHADER_STAGE_COMPUTE = 0x20
WHOLE_SIZE = 0xFFFFFFFFFFFFFFFF


class Recording:
    """One recorded command buffer and its prebuilt submit info."""

    __slots__ = ("cmd", "submit", "keep", "last_serial")

    def __init__(self, cmd: Any, submit: Any, keep: Any):
        self.cmd, self.submit, self.keep = cmd, submit, keep
        self.last_serial = 0


class Command:
    """A dispatch (workgroups, push constants) of one BindingSet, recorded up to MAX_COPIES times.

    A command buffer may not be submitted again while it is pending (ironaccel does not use
    SIMULTANEOUS_USE, which costs on some drivers), so back-to-back identical dispatches take the
    next idle copy, recording one if none is idle, and wait for the oldest past MAX_COPIES.
    """

    __slots__ = ("dims", "push", "copies", "next")
    MAX_COPIES = 4

    def __init__(self, dims: tuple[int, int, int], push: bytes):
        self.dims, self.push = dims, push
        self.copies: list[Recording] = []
        self.next = 0

    @property
    def last_serial(self) -> int:
        return max((c.last_serial for c in self.copies), default=0)

    def ready(self, core: DeviceState, entry: BindingSet) -> Recording:
        """An idle recording of this command, waiting or recording one if needed."""
        timeline = core.timeline
        for copy in self.copies:
            if copy.last_serial <= timeline.completed:
                return copy
        if self.copies and timeline.is_done(min(c.last_serial for c in self.copies)):
            return min(self.copies, key=lambda c: c.last_serial)
        if len(self.copies) < self.MAX_COPIES:
            cmd = core.allocate_command_buffer()
            try:
                submit, keep = core.submit_info(cmd)
                _record(core, entry, cmd, self.dims, self.push)
            except BaseException:  # the buffer goes back to the free list, not to the device's close
                core.free_command_buffer(cmd)
                raise
            copy = Recording(cmd, submit, keep)
            self.copies.append(copy)
            return copy
        oldest = min(self.copies, key=lambda c: c.last_serial)
        timeline.wait(oldest.last_serial)
        return oldest

    def rerecord(self, core: DeviceState, entry: BindingSet, dims: tuple[int, int, int], push: bytes) -> None:
        """Reuse this command's buffers for another dispatch: wait for them, keep one, record it anew."""
        core.timeline.wait(self.last_serial)
        self.dims, self.push = dims, push
        if not self.copies:
            return
        for extra in self.copies[1:]:
            core.free_command_buffer(extra.cmd)
        del self.copies[1:]
        _record(core, entry, self.copies[0].cmd, dims, push)
        self.copies[0].last_serial = 0


class BindingSet:
    """One pipeline bound to one tuple of buffers: its descriptor set and its recorded commands."""

    __slots__ = ("key", "state", "descriptor_set", "pool", "commands", "last_serial")

    def __init__(self, key: Any, state: PipelineState, descriptor_set: Any, pool: Any):
        self.key = key
        self.state = state
        self.descriptor_set = descriptor_set
        self.pool = pool
        self.commands: OrderedDict[Any, Command] = OrderedDict()
        self.last_serial = 0

    def retire(self, core: DeviceState) -> None:
        """Free the descriptor set and command buffers once their last submission has finished."""
        commands = list(self.commands.values())
        self.commands.clear()
        descriptor_set, pool = self.descriptor_set, self.pool
        last = max([self.last_serial, *(c.last_serial for c in commands)])

        def free() -> None:
            if core.handle is None:
                return
            for command in commands:
                for copy in command.copies:
                    core.free_command_buffer(copy.cmd)
            if descriptor_set is not None:
                core.free_descriptor_set(descriptor_set, pool)

        core.timeline.defer(last, free)


def _binding_set(core: DeviceState, state: PipelineState, allocs: list[Any]) -> BindingSet:
    key = (state.id, *(a.id for a in allocs))
    entry = core.bindings.get(key)
    if entry is not None:
        core.bindings.move_to_end(key)
        return entry
    max_range = core.limits["max_storage_buffer_range"]
    for i, alloc in enumerate(allocs):
        if alloc.capacity > max_range:
            raise InvalidArgument(BACKEND, "dispatch", detail=f"buffer {i} holds {alloc.capacity} bytes, over this "
                                  f"device's maxStorageBufferRange ({max_range})")
    if len(core.bindings) >= MAX_BINDING_SETS:
        _, oldest = core.bindings.popitem(last=False)
        for owner in oldest.key:
            keys = core.bindings_of.get(owner)
            if keys is not None:
                keys.discard(oldest.key)
        oldest.retire(core)
    descriptor_set = pool = None
    if allocs:
        ffi = core.ffi
        descriptor_set, pool = core.allocate_descriptor_set(state.set_layout)
        infos = ffi.new("VkDescriptorBufferInfo[]", [{"buffer": a.buffer, "offset": 0, "range": WHOLE_SIZE}
                                                     for a in allocs])
        writes = ffi.new("VkWriteDescriptorSet[]", [
            {"sType": 35, "dstSet": descriptor_set, "dstBinding": i, "descriptorCount": 1,
             "descriptorType": VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "pBufferInfo": infos + i}
            for i in range(len(allocs))
        ])
        core.lib.vkUpdateDescriptorSets(core.handle, len(allocs), writes, 0, ffi.NULL)
        core.stats["descriptor_sets_written"] += 1
    entry = BindingSet(key, state, descriptor_set, pool)
    core.bindings[key] = entry
    for owner in key:
        core.bindings_of.setdefault(owner, set()).add(key)
    return entry


def _command(core: DeviceState, entry: BindingSet, dims: tuple[int, int, int], push: bytes) -> Command:
    ckey = (dims, push)
    command = entry.commands.get(ckey)
    if command is not None:
        entry.commands.move_to_end(ckey)
        return command
    if len(entry.commands) >= MAX_COMMANDS_PER_SET:
        _, command = entry.commands.popitem(last=False)
        command.rerecord(core, entry, dims, push)
    else:
        command = Command(dims, push)
    entry.commands[ckey] = command
    return command


def _record(core: DeviceState, entry: BindingSet, cmd: Any, dims: tuple[int, int, int], push: bytes) -> None:
    ffi, lib, state = core.ffi, core.lib, entry.state
    results.check("vkResetCommandBuffer", lib.vkResetCommandBuffer(cmd, 0))
    results.check("vkBeginCommandBuffer", lib.vkBeginCommandBuffer(cmd, core.begin_reusable))
    lib.vkCmdPipelineBarrier(cmd, STAGE_COMPUTE | STAGE_TRANSFER, STAGE_COMPUTE, 0,
                             1, core.dispatch_before, 0, ffi.NULL, 0, ffi.NULL)
    lib.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, state.pipeline)
    if entry.descriptor_set is not None:
        sets = ffi.new("VkDescriptorSet[1]", [entry.descriptor_set])
        lib.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, state.layout, 0, 1, sets, 0, ffi.NULL)
    if push:
        lib.vkCmdPushConstants(cmd, state.layout, SHADER_STAGE_COMPUTE, 0, len(push), ffi.from_buffer(push))
    lib.vkCmdDispatch(cmd, *dims)
    lib.vkCmdPipelineBarrier(cmd, STAGE_COMPUTE, STAGE_HOST | STAGE_TRANSFER, 0,
                             1, core.dispatch_after, 0, ffi.NULL, 0, ffi.NULL)
    results.check("vkEndCommandBuffer", lib.vkEndCommandBuffer(cmd))
    core.stats["commands_recorded"] += 1


def submit(core: DeviceState, state: PipelineState, allocs: list[Any], dims: tuple[int, int, int],
           push: bytes) -> int:
    """Find or record the command for this checked dispatch and submit it; returns the submission's serial."""
    entry = _binding_set(core, state, allocs)
    recording = _command(core, entry, dims, push).ready(core, entry)
    serial = core.timeline.submit(recording.submit)
    recording.last_serial = entry.last_serial = state.last_serial = serial
    for alloc in allocs:
        alloc.last_serial = serial
    return serial
