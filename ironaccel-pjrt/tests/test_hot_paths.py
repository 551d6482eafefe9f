"""The hot paths' shortcuts: upload args kept per (dtype, shape, device, memory) and thread, buffers
tracked by handle, dropped small buffers destroyed after the next launch."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from ironaccel.errors import ClosedError
from ironaccel.types import DType
from ironaccel_pjrt import capi
from ironaccel_pjrt.buffer import DROPPED_BYTES, DROPPED_MAX, destroy_dropped
from ironaccel_pjrt.client import UPLOAD_SLOTS, Client

pytestmark = pytest.mark.backend("pjrt")

DESTROY = "PJRT_Buffer_Destroy"
DESTROY_ARGS = capi.STRUCTS["PJRT_Buffer_Destroy_Args"]

MUL_ADD_4 = (Path(__file__).with_name("data") / "mul_add.mlir").read_text()  # a * b + c


def test_upload_args_are_not_shared_between_dtypes_shapes_devices_or_memories(client: Client) -> None:
    """Interleaved uploads, each kind twice (the second from the kept args): every buffer is its own."""
    devices = (client.devices[0], client.devices[-1])
    kinds = [None] + [m.kind for m in devices[0].memories if m != devices[0].default_memory]
    cases = []
    for dtype in (np.float32, np.int32, np.uint32, np.float64, np.int8):  # three of the same itemsize
        for shape in ((6,), (2, 3), (3, 2), (), (0,), (1, 6)):
            for device in devices:
                for memory in kinds if device is devices[0] else [None]:
                    cases.append((np.dtype(dtype), shape, device, memory))
    rng = np.random.default_rng(7)
    for _ in range(2):
        made = []
        for dtype, shape, device, memory in cases:
            data = (rng.standard_normal(shape) * 100).astype(dtype)
            try:
                buf = client.buffer_from_host(data, device, memory=memory)
            except Exception:
                if memory is None:
                    raise
                continue  # a memory space this plugin takes no host upload into (test_buffers says which)
            made.append((buf, data, dtype, shape, device, memory))
        for buf, data, dtype, shape, device, memory in made:
            assert buf.shape == shape and buf.dtype is DType.of(dtype) and buf.placement() is device
            if memory is not None:
                assert buf.memory_kind() == memory
            back = buf.to_host()
            assert back.dtype == dtype and back.shape == shape
            np.testing.assert_array_equal(back, data)
            buf.delete()


def test_upload_pointer_of_every_kind_of_array(client: Client) -> None:
    """The data pointer through the buffer protocol (writeable arrays) and through numpy's (the rest)."""
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    read_only = data.copy()
    read_only.flags.writeable = False
    arrays = [data, read_only, np.broadcast_to(np.float32(3), (5,)), data[1], data.T, [[1.5, 2.5]], 7, np.int16(-3)]
    try:
        arrays.append(np.arange(6, dtype=DType.BFLOAT16.numpy))  # numpy exports no buffer of bfloat16
    except TypeError:
        pass  # no ml_dtypes here
    for array in arrays * 2:
        expected = np.asarray(array)
        buf = client.buffer_from_host(array)
        np.testing.assert_array_equal(buf.to_host(), expected)
        assert buf.shape == expected.shape
        buf.delete()


def test_upload_args_are_bounded(client: Client) -> None:
    for n in range(UPLOAD_SLOTS + 20):
        client.buffer_from_host(np.full(n + 1, n, np.int32)).delete()
        assert len(client._uploads.slots) <= UPLOAD_SLOTS


def test_uploads_from_threads_keep_their_own_args(client: Client) -> None:
    """The C call runs without the GIL: args shared between threads would be overwritten mid-call."""
    failures: list[str] = []
    start = threading.Barrier(4)

    def upload(worker: int) -> None:
        start.wait()
        for i in range(150):
            data = np.full(16, worker * 1000 + i, np.int32)  # one (dtype, shape) for every thread
            buf = client.buffer_from_host(data)
            back = buf.to_host()
            buf.delete()
            if not np.array_equal(back, data):
                failures.append(f"thread {worker} round {i}: got {back[:2]}")

    threads = [threading.Thread(target=upload, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:5]


def test_close_destroys_each_live_buffer_once(fresh_client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    client = fresh_client
    destroyed = _count_destroys(client, monkeypatch)
    exe = client.compile(MUL_ADD_4)
    bufs = [client.buffer_from_host(np.full(4, i, np.float32)) for i in range(5)]
    (out,) = exe.execute(bufs[:3])
    handles = [b._handle for b in bufs] + [out._handle]
    bufs[0].delete()
    bufs[0].delete()
    assert destroyed == handles[:1]
    assert len(client._buffers) == 5
    client.close()
    assert sorted(destroyed) == sorted(handles) and len(set(destroyed)) == 6, "each handle destroyed once"
    assert not client._buffers
    for buf in bufs[1:] + [out]:
        assert buf.closed
        buf.delete()  # a no-op: the client destroyed it
        with pytest.raises(ClosedError, match="client is closed"):
            buf.to_host()
    assert len(destroyed) == 6


def _count_destroys(client: Client, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    api = client.api
    destroy = api.function(DESTROY)
    destroyed: list[int] = []

    def counting_destroy(address: int) -> int:
        destroyed.append(DESTROY_ARGS.from_address(address).buffer)
        return destroy(address)

    monkeypatch.setitem(api._functions, DESTROY, counting_destroy)
    return destroyed


def test_dropped_small_buffers_go_at_the_next_launch(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = client.compile(MUL_ADD_4)
    destroy_dropped(client)
    destroyed = _count_destroys(client, monkeypatch)
    for i in range(10):
        bufs = [client.buffer_from_host(np.full(4, i, np.float32)) for _ in range(3)]
        (out,) = exe.execute(bufs)  # destroys the previous round's four, after the Execute call
        assert len(destroyed) == 4 * i
        np.testing.assert_array_equal(out.to_host(), np.full(4, i * i + i, np.float32))
        pending = [b._handle for b in bufs] + [out._handle]
        del bufs, out
        assert sorted(client._dropped) == sorted(pending) and not set(pending) & client._buffers
    one = client.buffer_from_host(np.ones(4, np.float32))
    (out,) = exe.execute([one, one, one])
    assert len(destroyed) == 40 and not client._dropped
    out.delete()  # delete() destroys at once
    one.delete()
    assert len(destroyed) == 42 and not client._dropped


def test_dropped_buffers_are_bounded(fresh_client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    client = fresh_client
    destroyed = _count_destroys(client, monkeypatch)
    big = client.buffer_from_host(np.zeros(DROPPED_BYTES // 4 + 1, np.float32))
    del big  # past DROPPED_BYTES: destroyed at once
    assert len(destroyed) == 1 and not client._dropped
    for i in range(3 * DROPPED_MAX):
        client.buffer_from_host(np.full(4, i, np.float32))  # dropped at once
        assert len(client._dropped) <= DROPPED_MAX
    assert len(destroyed) + len(client._dropped) == 1 + 3 * DROPPED_MAX
    client.close()  # destroys what is still waiting
    assert len(destroyed) == 1 + 3 * DROPPED_MAX and not client._dropped
