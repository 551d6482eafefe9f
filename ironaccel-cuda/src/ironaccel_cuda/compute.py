"""The cross-vendor ComputeDevice surface on a CUDA Device.

Code is CUDA C++ source (compiled by NVRTC to CUBIN for the device) or PTX
text.  A kernel takes its `buffers` device pointers first, then its `params`
scalars by value, in order; the block size is `workgroup_size`.  Everything
runs on the device's default stream, so calls are ordered as on one queue.
Buffers, pipelines and submissions belong to the Device handle that made them:
another handle's objects are rejected (InvalidArgument), as the protocol asks.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ironaccel import DType

from .errors import closed, invalid

if TYPE_CHECKING:
    from .event import Event
    from .memory import DeviceBuf
    from .module import Function, Module

__all__ = ["ComputeDeviceMixin", "Pipeline", "Submission"]


def looks_like_ptx(code: str | bytes) -> bool:
    text = code.decode(errors="replace") if isinstance(code, bytes) else code
    return ".entry" in text and (".version" in text or ".target" in text) and "__global__" not in text


class Pipeline:
    """A kernel ready to dispatch: `entry`, `buffers` pointers, `params` scalars, a fixed block."""

    def __init__(self, device: Any, module: Module, function: Function, entry: str, buffers: int, params: int,
                 block: tuple[int, int, int]):
        self.device = device
        self.module = module
        self.function = function
        self.entry = entry
        self.buffers = buffers
        self.params = params
        self.block = block

    def close(self) -> None:
        self.module.close()

    def __repr__(self) -> str:
        return f"<Pipeline {self.entry!r} buffers={self.buffers} params={self.params} block={self.block}>"


class Submission:
    """Work handed to the device; `wait()` blocks until it is done."""

    def __init__(self, event: Event):
        self._event = event

    def wait(self, timeout: float | None = None) -> None:
        if timeout is None:
            self._event.synchronize()
            return
        deadline = time.monotonic() + timeout
        while not self._event.query():
            if time.monotonic() >= deadline:
                raise TimeoutError(f"cuda: cuEventQuery: the work did not finish within {timeout} s")
            time.sleep(50e-6)

    def done(self) -> bool:
        return self._event.query()


class ComputeDeviceMixin:
    """upload / download / pipeline / dispatch for `Device` (synchronize and close live there)."""

    ordinal: int
    _state: Any

    def upload(self, array: Any) -> DeviceBuf:
        """A new buffer holding a copy of a C-contiguous numpy array (flattened)."""
        op = "upload"
        self._check_open(op)  # type: ignore[attr-defined]
        if not isinstance(array, np.ndarray):
            array = np.asarray(array)
        if not array.flags.c_contiguous:
            raise invalid(op, "the array is not C-contiguous (use np.ascontiguousarray)")
        if array.size == 0:
            raise invalid(op, "the array is empty")
        try:
            dtype = DType.of(array.dtype)
        except TypeError as exc:
            raise invalid(op, str(exc)) from None
        buf = self.alloc(array.size, dtype)  # type: ignore[attr-defined]
        try:
            buf.copy_from(array.reshape(-1))
        except BaseException:
            buf.close()
            raise
        return buf

    def write(self, buffer: DeviceBuf, array: Any) -> None:
        """Copy a C-contiguous array into the start of `buffer`, in order on the default stream.

        Work queued before the write still reads the old contents; `array` may be reused at once.
        """
        from . import _core

        op = "write"
        self._check_open(op)  # type: ignore[attr-defined]
        self._own(buffer, op)
        if not isinstance(array, np.ndarray):
            array = np.asarray(array)
        if not array.flags.c_contiguous:
            raise invalid(op, "the array is not C-contiguous (use np.ascontiguousarray)")
        nbytes = array.nbytes
        if nbytes > buffer.nbytes:
            raise invalid(op, f"{nbytes} bytes do not fit a buffer of {buffer.nbytes} bytes")
        if nbytes == 0:
            return
        default = self._state.default_stream
        _core.memcpy_htod(buffer._dp, array.reshape(-1).view(np.uint8), nbytes, default._h)
        _core.stream_sync(default._h)

    def download(self, buffer: DeviceBuf, out: np.ndarray | None = None) -> np.ndarray:
        """The buffer's contents as a new numpy array, or into `out`, after all earlier work."""
        op = "download"
        self._check_open(op)  # type: ignore[attr-defined]
        self._own(buffer, op)
        return self._download(buffer, out)

    def _download(self, buffer: DeviceBuf, out: np.ndarray | None) -> np.ndarray:
        from . import _core

        default = self._state.default_stream
        result = buffer.copy_to_host(out, stream=default)
        _core.stream_sync(default._h)
        return result

    def pipeline(self, code: str | bytes | Sequence[int], entry: str = "main", *, buffers: int, params: int = 0,
                 workgroup_size: tuple[int, int, int] = (64, 1, 1)) -> Pipeline:
        """Compile (CUDA C++) or load (PTX) `code` and find `entry`; checks its parameter count."""
        from .program import Program

        op = "pipeline"
        self._check_open(op)  # type: ignore[attr-defined]
        for name, value in (("buffers", buffers), ("params", params)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise invalid(op, f"{name} must be a non-negative int, got {value!r}")
        block = tuple(workgroup_size)
        if not 1 <= len(block) <= 3 or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in block):
            raise invalid(op, f"workgroup_size must be 1-3 positive ints, got {workgroup_size!r}")
        block3 = (*block, 1, 1)[:3]
        if isinstance(code, (bytes, bytearray)):
            image = bytes(code)
            module = self.load_module(image)  # type: ignore[attr-defined]
        elif isinstance(code, str) and looks_like_ptx(code):
            module = self.load_module(code.encode())  # type: ignore[attr-defined]
        elif isinstance(code, str):
            obj = Program(code, name_expressions=[entry]).compile("cubin", arch=self.compute_capability)  # type: ignore[attr-defined]
            module = self.load_module(obj)  # type: ignore[attr-defined]
        else:
            raise invalid(op, f"code must be CUDA C++ or PTX text (str) or a module image (bytes), "
                          f"got {type(code).__name__}")
        try:
            function = module.function(entry)
            layout = function.param_layout()
            if layout is not None and len(layout) != buffers + params:
                raise invalid(op, f"kernel {entry!r} takes {len(layout)} parameters, but the pipeline declares "
                              f"{buffers} buffers + {params} params")
        except BaseException:
            module.close()
            raise
        return Pipeline(self, module, function, entry, buffers, params, block3)  # type: ignore[arg-type]

    def dispatch(self, pipeline: Pipeline, buffers: Sequence[DeviceBuf], groups: int | tuple[int, ...],
                 params: Sequence[Any] = ()) -> Submission:
        """Queue `pipeline` over `groups` blocks; returns at once."""
        op = "dispatch"
        self._check_open(op)  # type: ignore[attr-defined]
        if not isinstance(pipeline, Pipeline) or pipeline.device is not self:
            raise invalid(op, "the pipeline belongs to another device")
        if len(buffers) != pipeline.buffers or len(params) != pipeline.params:
            raise invalid(op, f"{pipeline.entry!r} takes {pipeline.buffers} buffers and {pipeline.params} params, "
                          f"got {len(buffers)} and {len(params)}")
        for buf in buffers:
            self._own(buf, op)
        grid = self._groups(groups, op)
        pipeline.function.launch(grid, pipeline.block, *buffers, *params)
        return Submission(self._state.default_stream.record(self.create_event()))  # type: ignore[attr-defined]

    # -- cold helpers -------------------------------------------------------

    def _own(self, buffer: Any, op: str) -> None:
        from .memory import DeviceBuf

        if not isinstance(buffer, DeviceBuf) or buffer.device is not self:
            raise invalid(op, "the buffer belongs to another device")
        if buffer.ptr is None:
            raise closed(op, "buffer")

    def _groups(self, groups: Any, op: str) -> tuple[int, int, int]:
        parts = (groups,) if isinstance(groups, (int, np.integer)) and not isinstance(groups, bool) else groups
        try:
            dims = tuple(int(g) for g in parts if not isinstance(g, bool))
        except TypeError:
            raise invalid(op, f"groups must be an int or 1-3 ints, got {groups!r}") from None
        if not 1 <= len(dims) <= 3 or len(dims) != len(tuple(parts)):
            raise invalid(op, f"groups must be an int or 1-3 ints, got {groups!r}")
        dims3 = (*dims, 1, 1)[:3]
        limit = self._state.attributes.max_grid_dim
        for d, lim in zip(dims3, limit):
            if not 1 <= d <= lim:
                raise invalid(op, f"groups {dims3} outside 1..{limit} (the device's grid limits)")
        return dims3  # type: ignore[return-value]
