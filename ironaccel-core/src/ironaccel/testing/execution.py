"""Conformance tests of the execution model (plugin contract 1.2), part of `ComputeDeviceConformance`.

Each feature of `ironaccel.compute.execution.FEATURES` a device declares in
`device.features` must work as `ironaccel.protocols.ComputeDevice` says; each
one it does not declare must raise `Unsupported` saying why.  The tests use
the backend's `scale_offset_code` and two more kernels written in its
language (see `ComputeDeviceConformance`):

* `typed_params_code`: buffers x, y (float32; x read-only), a params block with
  fields `a: float32, pair: float32 x 2 (a vector), n: uint32, k: int32`, in
  that order; y[i] = a * x[i] + pair[0] - pair[1] * k for i < n.
* `constants_code`: buffers x, y (float32), constants `SCALE` (float32, default
  1.0) and `BIAS` (int32, default 0), a params block with one field
  `n: uint32`; y[i] = x[i] * SCALE + BIAS for i < n.

Both have workgroup size 64.  A backend whose language cannot express one
leaves it None; the tests that need it then fail unless the device does not
declare the feature.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest

from ironaccel.compute.execution import FEATURES, MEMORY_KINDS, ExternalFence, ExternalMemory
from ironaccel.compute.params import Scalar, Vector
from ironaccel.errors import ClosedError, InvalidArgument, InvalidState, Timeout, Unsupported
from ironaccel.types import CapabilityFlags, DType

__all__ = ["ExecutionConformance"]

WORKGROUP = 64


@dataclasses.dataclass
class _TypedParams:
    a: float
    pair: tuple[float, float]
    n: int
    k: int


def _lacks(device: Any, *features: str) -> bool:
    """True where the device does not declare one of `features`: the test of a feature then has nothing to
    check (test_undeclared_features_say_why checks that each undeclared one says so).  Not a skip: under
    IRONACCEL_REQUIRE a skip is a failure, and a backend need not have every feature."""
    return any(feature not in device.features for feature in features)


class ExecutionConformance:
    """Queues, fences, command batches, timestamps, typed params, constants, mapping, DLPack and interop."""

    backend_name: ClassVar[str] = ""
    entry: ClassVar[str] = "main"
    typed_params_code: ClassVar[Any] = None
    constants_code: ClassVar[Any] = None

    # Provided by ComputeDeviceConformance: the `device` and `pipeline` fixtures, `open_device` and the code.
    open_device: Callable[..., Any]
    scale_offset_code: ClassVar[Any] = None

    def _scale_offset(self, device: Any, x: Any, y: Any, n: int, a: float = 2.0, b: float = 1.0) -> tuple[Any, ...]:
        return ([x, y], (n + WORKGROUP - 1) // WORKGROUP, (np.float32(a), np.float32(b), np.uint32(n)))

    # -- declarations ----------------------------------------------------------------------------------

    def test_features_are_declared_from_the_known_set(self, device: Any) -> None:
        """Declared features and memory kinds come from the known sets; TIMESTAMPS is advertised exactly where
        timings can be read."""
        assert set(device.features) <= set(FEATURES), set(device.features) - set(FEATURES)
        assert "device" in device.memory_kinds and set(device.memory_kinds) <= set(MEMORY_KINDS)
        assert device.queue.index == 0 and device.queue.device is device
        assert device.max_queues >= (2 if "queues" in device.features else 1)
        timestamps = CapabilityFlags.TIMESTAMPS in device.descriptor.capabilities
        assert timestamps == ("timestamps" in device.features), \
            "advertise TIMESTAMPS exactly where timings can be read"

    def test_undeclared_features_say_why(self, device: Any) -> None:
        """Each feature the device does not declare raises Unsupported saying why, from the call that would use it."""
        calls: dict[str, Callable[[], Any]] = {
            "queues": device.create_queue,
            "fences": device.create_fence,
            "batches": device.batch,
            "timestamps": lambda: device.batch(timestamps=True),
            "constants": lambda: device.pipeline(self.constants_code or self.scale_offset_code, self.entry,
                                                 buffers=2, constants={"SCALE": 2.0}),
            "map": lambda: device.alloc(4, memory="host").map().__enter__(),
            "dlpack": lambda: np.from_dlpack(device.alloc(4, memory="host")),
            "export_memory": lambda: device.alloc(4, exportable=True),
            "import_memory": lambda: device.import_memory(ExternalMemory(-1, 16), 4),
            "export_fence": lambda: device.create_fence(exportable=True),
            "import_fence": lambda: device.import_fence(ExternalFence(-1)),
        }
        for feature in FEATURES:
            if feature in device.features:
                continue
            if feature == "typed_params":
                if self.typed_params_code is not None:
                    pipeline = device.pipeline(self.typed_params_code, self.entry, buffers=2,
                                               workgroup_size=(WORKGROUP, 1, 1))
                    assert pipeline.interface.params is None, "a reflected params block: declare typed_params"
                continue
            with pytest.raises((Unsupported, InvalidArgument, InvalidState), match=".") as info:
                calls[feature]()
            assert str(info.value), feature

    # -- queues --------------------------------------------------------------------------------------------

    def test_default_queue_runs_dispatches_in_order(self, device: Any, pipeline: Any) -> None:
        """The default queue (index 0) runs its dispatches in order; closing it leaves it open."""
        n = 1000
        x = device.upload(np.arange(n, dtype=np.float32))
        y = device.alloc(n, "float32")
        buffers, groups, params = self._scale_offset(device, x, y, n)
        device.queue.dispatch(pipeline, buffers, groups, params)
        sub = device.queue.dispatch(pipeline, [y, x], groups, (np.float32(1), np.float32(-1), np.uint32(n)))
        assert sub.queue is device.queue
        device.queue.synchronize()
        assert sub.done()
        np.testing.assert_allclose(device.download(x), np.arange(n, dtype=np.float32) * 2)
        device.queue.close()  # the default queue stays open
        assert not device.queue.closed

    def test_queues_are_ordered_by_fences(self, device: Any, pipeline: Any) -> None:
        """Work on a second queue, ordered by a fence signal and a queue wait, is seen by the other queue."""
        if _lacks(device, "queues", "fences"):
            return
        n = 4096
        data = np.random.default_rng(1).standard_normal(n).astype(np.float32)
        x, y, z = device.upload(data), device.alloc(n, "float32"), device.alloc(n, "float32")
        other = device.create_queue(priority=1)
        assert other.index > 0 and isinstance(other.priority, int) and other.device is device
        fence = device.create_fence()
        buffers, groups, params = self._scale_offset(device, x, y, n, 3.0, 0.5)
        other.dispatch(pipeline, buffers, groups, params)
        other.signal(fence, 1)
        device.queue.wait(fence, 1)  # on the device: the default queue's next work waits for the other queue's
        device.dispatch(pipeline, [y, z], groups, (np.float32(2), np.float32(0), np.uint32(n)))
        np.testing.assert_allclose(device.download(z), (np.float32(3) * data + np.float32(0.5)) * 2, rtol=1e-5,
                                   atol=1e-5)  # a fused multiply-add moves values near zero by ~1e-7
        fence.wait(1, timeout=30)
        assert fence.value >= 1
        other.synchronize()
        other.close()
        with pytest.raises(ClosedError):
            other.dispatch(pipeline, buffers, groups, params)
        other.close()  # twice is a no-op

    def test_queue_limits_and_bad_arguments(self, device: Any) -> None:
        """Bad priorities are InvalidArgument; queues past `max_queues` are InvalidState."""
        if _lacks(device, "queues"):
            return
        for bad in ("1", 1.5, None, True):
            with pytest.raises(InvalidArgument):
                device.create_queue(priority=bad)
        made = []
        with pytest.raises(InvalidState):
            for _ in range(device.max_queues):
                made.append(device.create_queue())
        assert len(made) == device.max_queues - 1
        for queue in made:
            queue.close()
        device.create_queue().close()  # closed queues give their place back

    # -- fences --------------------------------------------------------------------------------------------

    def test_fence_host_wait_and_poll(self, device: Any, pipeline: Any) -> None:
        """A fence signalled after work is waited for and polled from the host; its value only grows."""
        if _lacks(device, "fences"):
            return
        n = 512
        x, y = device.upload(np.ones(n, np.float32)), device.alloc(n, "float32")
        fence = device.create_fence(value=2)
        assert fence.value == 2
        device.queue.dispatch(pipeline, *self._scale_offset(device, x, y, n))
        device.queue.signal(fence, 7)
        fence.wait(7, timeout=30)
        assert fence.value == 7
        fence.wait(3)  # reached long ago
        np.testing.assert_array_equal(device.download(y), np.full(n, 3, np.float32))
        fence.close()
        fence.close()
        assert fence.closed

    def test_fence_rules(self, device: Any) -> None:
        """A fence value never goes down, and a wait for a value nothing will signal is refused, not a hang."""
        if _lacks(device, "fences"):
            return
        fence = device.create_fence()
        device.queue.signal(fence, 5)
        with pytest.raises(InvalidArgument):
            device.queue.signal(fence, 5)  # a timeline only increases
        with pytest.raises(InvalidState):
            fence.wait(6)  # nothing will signal 6: refused instead of hanging
        with pytest.raises(InvalidState):
            device.queue.wait(fence, 6)
        with pytest.raises(Timeout):
            fence.wait(6, timeout=0.05)
        for bad in (-1, 2**64, 1.5, True, None, "3"):
            with pytest.raises(InvalidArgument):
                device.queue.signal(fence, bad)
            with pytest.raises(InvalidArgument):
                device.create_fence(bad)
        for bad_timeout in (-1, float("nan"), "1"):
            with pytest.raises(InvalidArgument):
                fence.wait(1, timeout=bad_timeout)
        other = self.open_device()
        try:
            with pytest.raises(InvalidArgument):
                other.queue.signal(fence, 9)
            with pytest.raises(InvalidArgument):
                other.queue.wait(fence, 1)
        finally:
            other.close()
        for not_a_fence in (None, 3, "fence"):
            with pytest.raises(InvalidArgument):
                device.queue.signal(not_a_fence, 1)
        fence.close()
        with pytest.raises(ClosedError):
            device.queue.signal(fence, 10)
        with pytest.raises(ClosedError):
            fence.wait(1)

    # -- command batches -----------------------------------------------------------------------------------

    def test_batch_recorded_once_and_resubmitted(self, device: Any, pipeline: Any) -> None:
        """A batch recorded once (write, dispatch, read) gives the right answer each time it is submitted again."""
        if _lacks(device, "batches"):
            return
        n = 1000
        rng = np.random.default_rng(2)
        data = rng.standard_normal(n).astype(np.float32)
        x, y = device.alloc(n, "float32"), device.alloc(n, "float32")
        out = np.zeros(n, np.float32)
        batch = device.batch()
        write = batch.write(x, data)
        buffers, groups, params = self._scale_offset(device, x, y, n, 2.0, 1.0)
        run = batch.dispatch(pipeline, buffers, groups, params)
        batch.read(y, out)
        assert len(batch) == 3 and write.kind == "write" and run.index == 1
        for _ in range(3):
            out[:] = 0
            device.submit(batch).wait(timeout=60)
            np.testing.assert_allclose(out, np.float32(2) * data + 1, rtol=1e-6)
        fresh = rng.standard_normal(n).astype(np.float32)
        write.update(array=fresh)
        run.update(params=(np.float32(-1), np.float32(0.5), np.uint32(n)))
        sub = device.queue.submit(batch)
        sub.wait(timeout=60)
        np.testing.assert_allclose(out, -fresh + np.float32(0.5), rtol=1e-6)
        z = device.alloc(n, "float32")
        run.update(buffers=[x, z])
        device.submit(batch).wait(timeout=60)
        np.testing.assert_allclose(device.download(z), -fresh + np.float32(0.5), rtol=1e-6)
        batch.close()
        batch.close()
        with pytest.raises(ClosedError):
            device.submit(batch)

    def test_batch_copies_fills_and_order(self, device: Any, pipeline: Any) -> None:
        """Fills, copies, dispatches and reads in a batch run in recording order."""
        if _lacks(device, "batches"):
            return
        n = 256
        data = np.arange(n, dtype=np.float32)
        x, y, z = device.upload(data), device.alloc(n, "float32"), device.alloc(n, "float32")
        filled, copied = np.zeros(n, np.float32), np.zeros(n, np.float32)
        batch = device.batch()
        batch.fill(y, np.float32(1.5))
        batch.read(y, filled)
        batch.dispatch(pipeline, *self._scale_offset(device, x, y, n, 2.0, 0.0))  # y = 2x
        batch.copy(y, z, n * 2, src_offset=0, dst_offset=n * 2)  # the first half of y into z's second half
        batch.fill(z, np.float32(0), nbytes=n * 2)
        batch.dispatch(pipeline, *self._scale_offset(device, z, y, n, 1.0, 1.0))  # y = z + 1
        batch.read(y, copied)
        sub = device.submit(batch)
        assert sub.done() in (True, False)
        sub.wait(timeout=60)
        np.testing.assert_array_equal(filled, np.full(n, 1.5, np.float32))
        expected = np.concatenate([np.zeros(n // 2, np.float32), 2 * data[: n // 2]]) + 1
        np.testing.assert_array_equal(copied, expected)
        batch.close()

    def test_batch_bad_input(self, device: Any, pipeline: Any) -> None:
        """Empty batches and bad copies, fills, writes and reads are InvalidArgument when recorded."""
        if _lacks(device, "batches"):
            return
        n = 64
        x, y = device.upload(np.ones(n, np.float32)), device.alloc(n, "float32")
        batch = device.batch()
        with pytest.raises(InvalidArgument):
            device.submit(batch)  # empty
        for args in [(x, y, 3), (x, y, n * 4 + 4), (x, x, 8), (x, y, 8, 2), (x, "y", 8)]:
            with pytest.raises(InvalidArgument):
                if len(args) == 4:
                    batch.copy(args[0], args[1], args[2], src_offset=args[3])
                else:
                    batch.copy(*args)
        for value, kwargs in [(np.float32(1), {"offset": 2}), (np.float32(1), {"nbytes": 0}),
                              ("one", {}), (np.float32(1), {"nbytes": n * 4 + 4})]:
            with pytest.raises(InvalidArgument):
                batch.fill(y, value, **kwargs)
        with pytest.raises(InvalidArgument):
            batch.write(y, np.ones(3, np.uint8))  # not a multiple of 4 bytes
        with pytest.raises(InvalidArgument):
            batch.read(y, [0.0] * n)
        with pytest.raises(InvalidArgument):
            batch.dispatch(pipeline, [x, y], 1, (np.float32(1),))
        command = batch.dispatch(pipeline, *self._scale_offset(device, x, y, n))
        for bad in ({"src": x}, {}, {"params": (1,)}, {"buffers": [x]}):
            with pytest.raises(InvalidArgument):
                command.update(**bad)
        other = self.open_device()
        try:
            with pytest.raises(InvalidArgument):
                other.submit(batch)
            with pytest.raises(InvalidArgument):
                batch.copy(x, other.alloc(n, "float32"))
            if "fences" in other.features:
                foreign = other.create_fence()
                with pytest.raises(InvalidArgument):
                    device.submit(batch, signal=[(foreign, 1)])
                foreign.close()
        finally:
            other.close()
        if "fences" in device.features:
            fence = device.create_fence()
            for bad_pairs in ([fence], [(fence,)], 5, [(fence, -1)]):
                with pytest.raises(InvalidArgument):
                    device.submit(batch, signal=bad_pairs)
            with pytest.raises(InvalidState):
                device.submit(batch, wait=[(fence, 1)])  # nothing signals it
            sub = device.submit(batch, signal=[(fence, 1)])
            sub.wait(timeout=60)
            fence.wait(1, timeout=30)
            fence.close()
        y.close()
        with pytest.raises(ClosedError):
            device.submit(batch)  # a buffer it uses was closed
        z = device.alloc(n, "float32")
        command.update(buffers=[x, z])
        device.submit(batch).wait(timeout=60)  # the device and the batch are usable afterwards
        np.testing.assert_array_equal(device.download(z), np.full(n, 3, np.float32))
        batch.close()

    # -- timestamps -------------------------------------------------------------------------------------

    def test_timestamps_per_command(self, device: Any, pipeline: Any) -> None:
        """A timestamped batch gives one ordered, non-negative span per command."""
        if _lacks(device, "timestamps", "batches"):
            return
        n = 1 << 16
        x, y = device.upload(np.ones(n, np.float32)), device.alloc(n, "float32")
        batch = device.batch(timestamps=True)
        for _ in range(3):
            batch.dispatch(pipeline, *self._scale_offset(device, x, y, n))
        batch.copy(y, x)
        sub = device.submit(batch)
        timings = sub.timings(timeout=60)
        assert len(timings.spans) == 4 and len(timings.commands_ns) == 4
        starts = [start for start, _ in timings.spans]
        assert starts[0] == 0 and starts == sorted(starts)
        assert all(end >= start for start, end in timings.spans)
        assert timings.total_ns >= max(timings.commands_ns) and timings.total_ns > 0
        again = device.submit(batch).timings(timeout=60)
        assert len(again.spans) == 4
        plain = device.batch()
        plain.dispatch(pipeline, *self._scale_offset(device, x, y, n))
        with pytest.raises(InvalidState):
            device.submit(plain).timings()
        for bad in ("yes", 1, None):
            with pytest.raises(InvalidArgument):
                device.batch(timestamps=bad)

    # -- typed params and reflection ---------------------------------------------------------------------

    def _typed_pipeline(self, device: Any) -> Any:
        if self.typed_params_code is None:
            pytest.fail("typed_params is declared, but the test class gives no typed_params_code")
        return device.pipeline(self.typed_params_code, self.entry, buffers=2, workgroup_size=(WORKGROUP, 1, 1))

    def test_interface_reflects_the_params_block(self, device: Any) -> None:
        """A pipeline's interface reflects the kernel's params block: names, types, offsets and bindings."""
        if _lacks(device, "typed_params"):
            return
        interface = self._typed_pipeline(device).interface
        block = interface.params
        assert block is not None and block.names == ("a", "pair", "n", "k")
        a, pair, n, k = block.fields
        assert a.type == Scalar(DType.FLOAT32) and pair.type == Vector(DType.FLOAT32, 2)
        assert n.type == Scalar(DType.UINT32) and k.type == Scalar(DType.INT32)
        assert a.offset < pair.offset < n.offset < k.offset and pair.offset % 8 == 0
        assert block.size >= k.offset + 4
        assert len(interface.bindings) == 2 and [b.binding for b in interface.bindings] == sorted(
            b.binding for b in interface.bindings)
        assert interface.bindings[1].writable

    def test_typed_params_by_name_record_dataclass_and_order(self, device: Any) -> None:
        """Typed params given as a mapping, a numpy record, a dataclass or in order all give the same result."""
        if _lacks(device, "typed_params"):
            return
        pipeline = self._typed_pipeline(device)
        n = 300
        data = np.random.default_rng(3).standard_normal(n).astype(np.float32)
        x, y = device.upload(data), device.alloc(n, "float32")
        record = np.zeros((), pipeline.interface.params.numpy_dtype())
        record["a"], record["pair"], record["n"], record["k"] = 1.5, (0.25, 2.0), n, -3
        forms = [
            {"a": 1.5, "pair": (0.25, 2.0), "n": n, "k": -3},
            record[()],
            _TypedParams(1.5, (0.25, 2.0), n, -3),
            (1.5, np.array([0.25, 2.0], np.float32), n, -3),
        ]
        expected = np.float32(1.5) * data + np.float32(0.25) - np.float32(2.0) * np.float32(-3)
        groups = (n + WORKGROUP - 1) // WORKGROUP
        for form in forms:
            y_host = np.zeros(n, np.float32)
            device.write(y, y_host)
            device.dispatch(pipeline, [x, y], groups, form)
            np.testing.assert_allclose(device.download(y), expected, rtol=1e-5, atol=1e-5)

    def test_typed_params_bad_input(self, device: Any) -> None:
        """Unknown fields, wrong shapes, out-of-range and wrongly typed values are InvalidArgument."""
        if _lacks(device, "typed_params"):
            return
        pipeline = self._typed_pipeline(device)
        n = 64
        x, y = device.upload(np.ones(n, np.float32)), device.alloc(n, "float32")
        good: dict[str, Any] = {"a": 1.0, "pair": (0.0, 0.0), "n": n, "k": 0}
        changes: list[dict[str, Any]] = [
            {"b": 1.0}, {"pair": (1.0, 2.0, 3.0)}, {"pair": 1.0}, {"k": 1.5}, {"n": -1}, {"n": 2**32}, {"a": "x"},
            {"a": np.float64(1.0)}, {"k": True},
        ]
        for change in changes:
            with pytest.raises(InvalidArgument) as info:
                device.dispatch(pipeline, [x, y], 1, {**good, **change})
            assert "params" in str(info.value)
        missing = dict(good)
        del missing["k"]
        for bad in (missing, (1.0, (0.0, 0.0), n), b"\0" * 3, None, "abc"):
            with pytest.raises(InvalidArgument):
                device.dispatch(pipeline, [x, y], 1, bad)
        device.dispatch(pipeline, [x, y], 1, good).wait(timeout=60)  # usable afterwards
        np.testing.assert_array_equal(device.download(y), np.ones(n, np.float32))

    # -- specialization constants ------------------------------------------------------------------------

    def test_constants_specialize_a_pipeline(self, device: Any) -> None:
        """Specialization constants make their own program and change the result; defaults apply otherwise."""
        if _lacks(device, "constants"):
            return
        assert self.constants_code is not None, "constants is declared: give constants_code"
        n = 200
        data = np.arange(n, dtype=np.float32)
        x, y = device.upload(data), device.alloc(n, "float32")
        groups = (n + WORKGROUP - 1) // WORKGROUP
        plain = device.pipeline(self.constants_code, self.entry, buffers=2, workgroup_size=(WORKGROUP, 1, 1))
        special = device.pipeline(self.constants_code, self.entry, buffers=2, workgroup_size=(WORKGROUP, 1, 1),
                                  constants={"SCALE": 2.5, "BIAS": 3})
        assert special.program is not plain.program
        device.dispatch(plain, [x, y], groups, (np.uint32(n),))
        np.testing.assert_array_equal(device.download(y), data)
        device.dispatch(special, [x, y], groups, (np.uint32(n),))
        np.testing.assert_array_equal(device.download(y), data * np.float32(2.5) + 3)
        listed = {c.name: c for c in special.interface.constants}
        if listed:  # where the code's constants are reflected, their types are checked
            assert {"SCALE", "BIAS"} <= set(listed)
            with pytest.raises(InvalidArgument):
                device.pipeline(self.constants_code, self.entry, buffers=2, constants={"NOPE": 1})
            with pytest.raises(InvalidArgument):
                device.pipeline(self.constants_code, self.entry, buffers=2, constants={"BIAS": 1.5})
        for bad in ({"SCALE": "x"}, {"1bad": 1}, {"SCALE": None}, {"SCALE": float("nan")}, ["SCALE"], {(1,): 1}):
            with pytest.raises(InvalidArgument):
                device.pipeline(self.constants_code, self.entry, buffers=2, constants=bad)

    # -- memory kinds, mapping, DLPack ----------------------------------------------------------------------

    def test_asarray_never_makes_an_object_array(self, device: Any) -> None:
        """`np.asarray(buffer)` is a view of mapped memory or InvalidState pointing at download, never an object
        array."""
        buf = device.upload(np.arange(8, dtype=np.float32))
        try:
            view = np.asarray(buf)
        except InvalidState as exc:
            assert "download" in str(exc)
        else:
            assert view.dtype == np.float32 and view.shape == (8,)
            np.testing.assert_array_equal(view, np.arange(8, dtype=np.float32))
        copied = np.array(buf, copy=True) if np.lib.NumpyVersion(np.__version__) >= "2.0.0" else device.download(buf)
        np.testing.assert_array_equal(copied, np.arange(8, dtype=np.float32))
        for bad in ("nowhere", 3, None):
            with pytest.raises(InvalidArgument):
                device.alloc(4, memory=bad)
        with pytest.raises(InvalidArgument):
            device.alloc(4, exportable="yes")

    def test_map_host_memory(self, device: Any, pipeline: Any) -> None:
        """Each host-visible memory kind maps as a numpy view whose writes the device sees, and the reverse."""
        if _lacks(device, "map"):
            return
        n = 128
        kinds = [k for k in device.memory_kinds if k != "device"]
        assert kinds, "map is declared: at least one host-visible kind"
        y = device.alloc(n, "float32")
        for kind in kinds:
            buf = device.alloc(n, "float32", memory=kind)
            assert buf.memory == kind and buf.host_visible
            with buf.map() as view:
                assert view.dtype == np.float32 and view.shape == (n,)
                view[:] = np.arange(n, dtype=np.float32)
            with buf.map(write=False) as view:
                np.testing.assert_array_equal(view, np.arange(n, dtype=np.float32))
            if kind == "host":  # bindable: a dispatch reads what the host wrote, and the host sees what it wrote
                device.dispatch(pipeline, *self._scale_offset(device, buf, y, n, 1.0, 1.0))
                device.dispatch(pipeline, *self._scale_offset(device, y, buf, n, 2.0, 0.0))
                with buf.map(write=False) as view:
                    np.testing.assert_array_equal(view, (np.arange(n, dtype=np.float32) + 1) * 2)
            buf.close()
            with pytest.raises(ClosedError):
                buf.map().__enter__()
        if not device.alloc(4).host_visible:
            with pytest.raises(InvalidArgument) as info:
                device.alloc(4).map().__enter__()
            assert "download" in str(info.value)

    def test_views_of_mapped_memory_outlive_close(self, device: Any) -> None:
        """A numpy view of host memory keeps that memory alive after the buffer is closed."""
        if _lacks(device, "map"):
            return
        if "host" not in device.memory_kinds:
            return  # no persistent host memory here: map by copy, checked by test_map_host_memory
        buf = device.alloc(64, "float32", memory="host")
        view = np.asarray(buf)  # no copy: host memory is mapped for the buffer's life
        view[:] = 5
        np.testing.assert_array_equal(device.download(buf), np.full(64, 5, np.float32))
        tail = view[32:]
        buf.close()
        del view
        gc.collect()
        tail[:] = 7  # the memory stays until the last array over it is gone: no crash
        assert float(tail.sum()) == 7 * 32
        del tail
        gc.collect()

    def test_dlpack(self, device: Any) -> None:
        """DLPack in (host arrays, by copy) always; out without a copy where declared, a typed refusal where not."""
        data = np.arange(32, dtype=np.int32)
        imported = device.from_dlpack(data)  # host memory in: a copy
        np.testing.assert_array_equal(device.download(imported), data)
        with pytest.raises(InvalidArgument):
            device.from_dlpack(object())
        if "dlpack" not in device.features:
            buf = device.alloc(4)
            refusals: tuple[type[BaseException], ...] = (InvalidState, InvalidArgument, Unsupported)
            try:
                on_device = buf.__dlpack_device__()[0] != 1
            except (AttributeError, InvalidState, Unsupported):
                on_device = False
            if on_device:
                refusals += (RuntimeError, BufferError)  # a device tensor (kDLCUDA, ...): numpy's own refusal
            with pytest.raises(refusals):
                np.from_dlpack(buf)
            return
        assert "host" in device.memory_kinds, "DLPack export needs persistent host memory"
        buf = device.alloc(32, "int32", memory="host")
        with buf.map() as view:
            view[:] = data
        assert buf.__dlpack_device__() == (1, 0)
        exported = np.from_dlpack(buf)
        np.testing.assert_array_equal(exported, data)
        exported[0] = 99  # the same memory
        assert device.download(buf)[0] == 99

    # -- zero-copy between devices -------------------------------------------------------------------

    def test_memory_hand_over_without_a_copy(self, device: Any) -> None:
        """Memory exported by one device and imported by another is the same memory: writes show on both sides."""
        if _lacks(device, "export_memory", "import_memory"):
            return
        n = 1024
        data = np.arange(n, dtype=np.float32)
        source = device.alloc(n, "float32", exportable=True)
        device.write(source, data)
        device.synchronize()
        with pytest.raises(InvalidArgument):
            device.export_memory(device.alloc(n, "float32"))  # not exportable
        other = self.open_device()
        try:
            with device.export_memory(source) as ext:
                assert ext.size >= n * 4 and ext.fileno() >= 0
                seen = other.import_memory(ext, n, "float32")
                again = other.import_memory(ext, n // 2, "float32")  # the export stays usable
                with pytest.raises(InvalidArgument):
                    other.import_memory(ext, ext.size // 4 + 1, "float32")  # larger than the memory
                for bad in (None, 3, "fd"):
                    with pytest.raises(InvalidArgument):
                        other.import_memory(bad, n)
            np.testing.assert_array_equal(other.download(seen), data)
            np.testing.assert_array_equal(other.download(again), data[: n // 2])
            other.write(seen, data * 2)
            other.synchronize()
            np.testing.assert_array_equal(device.download(source), data * 2)
            with pytest.raises(ClosedError):
                other.import_memory(ext, n)  # the export was closed
            seen.close()
            again.close()
        finally:
            other.close()

    def test_fence_hand_over(self, device: Any) -> None:
        """A fence exported by one device and imported by another orders work both ways."""
        if _lacks(device, "export_fence", "import_fence"):
            return
        fence = device.create_fence(exportable=True)
        other = self.open_device()
        try:
            with device.export_fence(fence) as ext:
                mirror = other.import_fence(ext)
            device.queue.signal(fence, 4)
            mirror.wait(4, timeout=30)
            assert mirror.value >= 4
            other.queue.signal(mirror, 9)
            fence.wait(9, timeout=30)
            mirror.close()
        finally:
            other.close()
        with pytest.raises(InvalidArgument):
            device.export_fence(device.create_fence())  # not exportable
