"""The cross-vendor ComputeDevice on HIP, by the compute kit (`ironaccel.compute.ComputeDeviceBase`).

Code is HIP C++ source with an ``extern "C" __global__`` kernel named `entry`, compiled by hipRTC for the
device's gcnArchName and loaded with hipModuleLoadData (a pipeline is a hipRTC program).  The kernel takes its
`buffers` device pointers first, then its `params` 32-bit scalars by value, checked against the code object's
metadata when the pipeline is made.  A dispatch is hipModuleLaunchKernel with the pipeline's workgroup size
(`program.workgroup_size`, set by the kit) as the block; its serial is an event recorded after it.

Execution model: "queues" are HIP streams (with priority).  Fences, batches and timestamps are not
declared yet: they need hipEvent-backed fences and a batch recorder (see the README); the kit says why.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from ironaccel.compute import BufferHandle, ComputeDeviceBase, Interface, PipelineHandle, Program, Submission
from ironaccel.errors import InvalidArgument
from ironaccel.types import CapabilityFlags, DeviceDescriptor, DType

from .binding import BACKEND
from .compiler import Program as HiprtcProgram
from .device import DeviceMemory, Event, Function, HipDevice, Module, Stream
from .launch import Packed

__all__ = ["HipComputeDevice"]

#: HIP's grid limits: x up to 2**31 - 1 blocks, y and z 65535.
GRID_LIMITS = (2**31 - 1, 65535, 65535)
_POLL = 50e-6


class HipBuffer(BufferHandle):
    __slots__ = ()


class HipPipeline(PipelineHandle):
    __slots__ = ()


class HipSubmission(Submission):
    __slots__ = ()


class HipProgram(Program):
    """A loaded module and its kernel (one hipRTC compile), shared by the pipelines with its key."""

    def __init__(self, module: Module, function: Function, buffers: int, params: int):
        super().__init__(buffers, params, Interface.unknown(buffers))
        self.module, self.function = module, function

    def release(self) -> None:
        if not self.released:
            super().release()
            self.module.close()


class HipComputeDevice(ComputeDeviceBase):
    """ComputeDevice over a HipDevice (which it owns and closes)."""

    backend = BACKEND
    language = "HIP C++"
    buffer_type = HipBuffer
    pipeline_type = HipPipeline
    submission_type = HipSubmission
    buffer_limit_name = "the device's memory"
    group_limit_name = "HIP's grid limits"
    execution_features = frozenset({"queues"})
    #: Streams one device may have besides the null stream (a bound on what a caller can leak).
    MAX_QUEUES = 64

    def __init__(self, hip: HipDevice):
        if not isinstance(hip, HipDevice):
            raise InvalidArgument(BACKEND, "open", detail=f"expected a HipDevice, got {type(hip).__name__}")
        self.hip = hip
        descriptor: DeviceDescriptor = hip.descriptor
        if "timestamps" not in self.execution_features:  # HIP has event timing; this device cannot read it yet
            descriptor = dataclasses.replace(descriptor,
                                             capabilities=descriptor.capabilities & ~CapabilityFlags.TIMESTAMPS)
        self.arch = str(descriptor.extras.get("gcn_arch_name") or "") or None
        #: Events recorded after each submission of the null stream, by serial, until waited for.
        self._events: dict[int, Event] = {}
        self._submitted = self._completed = 0
        self._open(descriptor, max_buffer_bytes=max(descriptor.memory_bytes, 1), group_limits=GRID_LIMITS)

    # -- memory ------------------------------------------------------------------------------------------

    def _create_buffer(self, nbytes: int, dtype: DType, data: np.ndarray | None) -> DeviceMemory:
        memory = self.hip.alloc(nbytes)
        if data is not None:
            try:
                memory.copy_from(data)
            except BaseException:
                memory.close()
                raise
        return memory

    def _free_buffer(self, handle: DeviceMemory) -> None:
        handle.close()  # hipFree waits for the work that uses it

    def _write(self, handle: DeviceMemory, data: np.ndarray) -> None:
        handle.copy_from(data)  # hipMemcpyHtoD on the null stream: after earlier work

    def _read(self, handle: DeviceMemory, out: np.ndarray) -> None:
        handle.copy_to(out)

    # -- programs ----------------------------------------------------------------------------------------

    def _build(self, code: str, entry: str, buffers: int, params: int,
               workgroup_size: tuple[int, int, int]) -> HipProgram:
        image = HiprtcProgram(code).compile(arch=self.arch)
        module = self.hip.load_module(bytes(image))
        try:
            function = module.function(entry)
            layout = function.layout or ()
            pointers = [a.pointer for a in layout]
            expected = [True] * buffers + [False] * params
            if pointers != expected or any(a.size != 4 for a in layout[buffers:]):
                raise InvalidArgument(BACKEND, "pipeline", detail=(
                    f"kernel {entry!r} takes {len(layout)} parameter(s) ({', '.join(self._kinds(layout))}), but the "
                    f"pipeline declares {buffers} buffer pointer(s) then {params} 32-bit param(s)"))
        except BaseException:
            module.close()
            raise
        return HipProgram(module, function, buffers, params)

    @staticmethod
    def _kinds(layout: Any) -> list[str]:
        return ["pointer" if a.pointer else f"{a.size}-byte value" for a in layout]

    # -- launch and wait ----------------------------------------------------------------------------------

    def _packed(self, program: HipProgram, handles: list[DeviceMemory], params: Any) -> Packed:
        layout = program.function.layout or ()
        raw = [int(h.ptr).to_bytes(8, "little") for h in handles]
        words = bytes(params)
        raw += [words[4 * i: 4 * i + 4] for i in range(program.params)]
        return Packed(layout, raw)

    def _go(self, stream: Stream | None, program: HipProgram, handles: list[DeviceMemory],
            dims: tuple[int, int, int], params: Any) -> None:
        packed = self._packed(program, handles, params)
        fn = program.function
        from .binding import call

        call(self.hip._hip.hipModuleLaunchKernel, "hipModuleLaunchKernel", fn._handle, *dims,
             *program.workgroup_size, 0, self.hip._stream(stream, "hipModuleLaunchKernel"), packed.address, None)

    def _launch(self, program: HipProgram, handles: list[DeviceMemory], dims: tuple[int, int, int],
                params: Any) -> int:
        self._go(None, program, handles, dims, params)
        self._submitted += 1
        self._events[self._submitted] = self.hip.event().record(None)
        return self._submitted

    def _wait(self, serial: int, seconds: float | None) -> bool:
        pending = sorted(s for s in self._events if s <= serial)
        deadline = None if seconds is None else time.monotonic() + seconds
        for s in pending:
            event = self._events[s]
            if deadline is None:
                event.synchronize()
            else:
                while not event.query():
                    if time.monotonic() >= deadline:
                        return False
                    time.sleep(_POLL)
            self._events.pop(s).close()
            self._completed = max(self._completed, s)
        self._completed = max(self._completed, serial)
        return True

    # -- queues (HIP streams) -----------------------------------------------------------------------------

    def _queue_limit(self) -> int:
        return self.MAX_QUEUES

    def _create_queue(self, priority: int) -> tuple[dict[str, Any], int]:
        stream = self.hip.stream(-priority)  # the kit: higher is more urgent; HIP: lower is
        return {"stream": stream, "serial": 0, "events": {}}, -stream.priority

    def _destroy_queue(self, vq: dict[str, Any]) -> None:
        for event in vq["events"].values():
            event.close()
        vq["stream"].close()

    def _launch_on(self, vq: Any, program: Any, handles: list[Any], dims: tuple[int, int, int], params: Any) -> int:
        if vq is None:
            return self._launch(program, handles, dims, params)
        self._go(vq["stream"], program, handles, dims, params)
        vq["serial"] += 1
        vq["events"][vq["serial"]] = self.hip.event().record(vq["stream"])
        return int(vq["serial"])

    def _wait_on(self, vq: Any, serial: int, seconds: float | None) -> bool:
        if vq is None:
            return self._wait(serial, seconds)
        deadline = None if seconds is None else time.monotonic() + seconds
        for s in sorted(s for s in vq["events"] if s <= serial):
            event = vq["events"][s]
            while not event.query():
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                time.sleep(_POLL)
            vq["events"].pop(s).close()
        return True

    def _last_serial(self, vq: Any) -> int:
        return self._submitted if vq is None else int(vq["serial"])

    def _shutdown(self) -> None:
        for event in self._events.values():
            event.close()
        self._events.clear()
        self.hip.synchronize()
        self.hip.close()
