"""Client, devices, memory spaces and buffers, on every discovered plugin."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ironaccel.errors import ClosedError, DriverError, InvalidArgument
from ironaccel.types import DType
from ironaccel_pjrt.client import Client
from ironaccel_pjrt.dtypes import SUPPORTED

pytestmark = pytest.mark.backend("pjrt")

SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 3, 4)]


def random_array(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Values that fill the type's range enough to catch a wrong element size or byte order."""
    np_dtype = dtype.numpy
    if dtype is DType.BOOL:
        return np.asarray(rng.random(shape) > 0.5)
    if np_dtype.kind in "iu":
        info = np.iinfo(np_dtype)
        return np.asarray(rng.integers(info.min, info.max, size=shape, dtype=np_dtype, endpoint=True))
    if np_dtype.kind == "c":
        return np.asarray(rng.standard_normal(shape) * 1e3 + 1j * rng.standard_normal(shape)).astype(np_dtype)
    return np.asarray(rng.standard_normal(shape) * 1e2).astype(np_dtype)


def test_client_and_devices(client: Client) -> None:
    assert client.host_memcpy == (client.platform_name == "cpu")
    assert client.platform_name in ("cpu", "cuda", "rocm", "tpu", "gpu"), client.platform_name
    assert client.devices, "a client lists at least one addressable device"
    ids = [d.id for d in client.devices]
    assert len(set(ids)) == len(ids)
    for index, device in enumerate(client.devices):
        assert device.index == index and device.client is client
        assert device.kind and device.description
        if device.memories:
            assert device.default_memory in device.memories
            assert all(m.kind for m in device.memories)
    if client.platform_name == "cpu":
        assert len(client.devices) == 4, "the XLA CPU plugins make 4 devices by default"
        assert all(d.kind == "cpu" for d in client.devices)
    if client.platform_name == "cuda":
        assert all("NVIDIA" in d.kind for d in client.devices), [d.kind for d in client.devices]
        assert "compute_capability" in client.devices[0].attributes, client.devices[0].attributes
        stats = client.devices[0].memory_stats()
        assert stats["bytes_in_use"] >= 0 and stats.get("bytes_limit", 1 << 31) > 1 << 30, stats


@pytest.fixture(params=["plugin-copy", "direct-copy"])
def copy_path(request: pytest.FixtureRequest, client: Client, monkeypatch: pytest.MonkeyPatch) -> str:
    """to_host through PJRT_Buffer_ToHostBuffer, or (CPU plugins) a memmove from PJRT_Buffer_UnsafePointer."""
    monkeypatch.setattr(client, "host_memcpy", client.host_memcpy and request.param == "direct-copy")
    return str(request.param)


@pytest.mark.parametrize("dtype", SUPPORTED, ids=[d.value for d in SUPPORTED])
def test_round_trip_every_dtype(client: Client, dtype: DType, copy_path: str) -> None:
    try:
        assert dtype.numpy.itemsize == dtype.itemsize
    except TypeError as exc:  # bfloat16 without ml_dtypes: no numpy array can hold it, and we say so
        assert dtype is DType.BFLOAT16 and "ml_dtypes" in str(exc)
        return
    rng = np.random.default_rng()
    for shape in SHAPES:
        for device in (client.devices[0], client.devices[-1]):
            data = random_array(rng, dtype, shape)
            buf = client.buffer_from_host(data, device)
            assert buf.shape == shape and buf.dtype is dtype and buf.nbytes == data.nbytes
            assert buf.placement() is device
            back = buf.to_host()
            assert back.dtype == data.dtype and back.shape == data.shape
            np.testing.assert_array_equal(back, data)
            out = np.empty_like(data)
            out.reshape(-1).view(np.uint8)[...] = 0xA5  # poisoned: every byte must be overwritten
            assert buf.to_host(out) is out
            np.testing.assert_array_equal(out, data)
            buf.delete()


def test_every_memory_space(client: Client) -> None:
    data = np.random.default_rng().standard_normal((16, 3)).astype(np.float32)
    device = client.devices[0]
    if not device.memories:
        pytest.skip("the plugin lists no memory spaces")
    assert device.default_memory is not None
    worked = []
    for space in device.memories:
        try:
            buf = client.buffer_from_host(data, device, memory=space.kind)
        except DriverError as exc:  # a plugin may not take host uploads into every space: typed, named
            assert space != device.default_memory and exc.op == "PJRT_Client_BufferFromHostBuffer", exc
            continue
        assert buf.memory_kind() == space.kind
        np.testing.assert_array_equal(buf.to_host(), data)
        buf.delete()
        worked.append(space.kind)
    assert device.default_memory.kind in worked
    if client.platform_name == "cpu":
        assert sorted(worked) == sorted(m.kind for m in device.memories)
    with pytest.raises(InvalidArgument, match="no memory of kind"):
        client.buffer_from_host(data, device, memory="no_such_memory")


def test_non_contiguous_input_and_flat_out(client: Client) -> None:
    base = np.arange(48, dtype=np.int32).reshape(6, 8)
    view = base[::2, 1::3]
    buf = client.buffer_from_host(view)
    assert buf.shape == view.shape
    np.testing.assert_array_equal(buf.to_host(), view)
    flat = np.full(view.size, -1, np.int32)
    buf.to_host(flat)  # same element count, another shape: allowed
    np.testing.assert_array_equal(flat, view.ravel())
    with pytest.raises(InvalidArgument):
        buf.to_host(np.empty(view.size + 1, np.int32))
    with pytest.raises(InvalidArgument):
        buf.to_host(np.empty(view.size, np.int64))
    with pytest.raises(InvalidArgument):
        buf.to_host(np.empty((view.size, 2), np.int32)[:, 0])  # not contiguous
    buf.delete()


def test_copy_between_devices_and_readiness(client: Client) -> None:
    data = np.random.default_rng().standard_normal(1000)
    src = client.buffer_from_host(data, client.devices[0])
    if len(client.devices) == 1:  # GPU clients refuse a copy onto the same device
        try:
            src.copy_to(client.devices[0]).delete()
        except DriverError as exc:
            assert exc.op == "PJRT_Buffer_CopyToDevice" and exc.code is not None
    dst = src.copy_to(client.devices[-1]) if len(client.devices) > 1 else src
    assert dst.placement() is client.devices[-1]
    assert dst.block_until_ready() is dst and dst.is_ready()
    np.testing.assert_array_equal(dst.to_host(), data)
    assert src.on_device_size() >= data.nbytes
    dst.delete()
    src.delete()


def test_delete_is_idempotent_and_final(client: Client) -> None:
    buf = client.buffer_from_host(np.ones(8, np.float32))
    buf.delete()
    buf.delete()
    assert buf.closed
    for call in (buf.to_host, buf.block_until_ready, buf.is_ready, buf.memory_kind):
        with pytest.raises(ClosedError) as info:
            call()
        assert info.value.op.startswith("PJRT_Buffer_")


def test_unsupported_dtypes(client: Client) -> None:
    for bad in (np.array(["a", "b"]), np.array([1, "x"], dtype=object), np.arange(3).astype("datetime64[s]"),
                np.zeros(2, np.float128) if hasattr(np, "float128") else np.zeros(2, "V4")):
        with pytest.raises(InvalidArgument) as info:
            client.buffer_from_host(bad)
        assert info.value.op == "PJRT_Client_BufferFromHostBuffer"
        assert "no PJRT element type" in str(info.value)


def test_buffer_of_a_closed_client(fresh_client: Client) -> None:
    buf = fresh_client.buffer_from_host(np.arange(4, dtype=np.float32))
    exe = fresh_client.compile(MUL_ADD_4)
    fresh_client.close()
    fresh_client.close()  # idempotent
    assert buf.closed and exe.closed
    with pytest.raises(ClosedError, match="client is closed"):
        buf.to_host()
    with pytest.raises(ClosedError, match="client is closed"):
        exe.execute([buf, buf, buf])
    with pytest.raises(ClosedError):
        fresh_client.buffer_from_host(np.ones(2))
    with pytest.raises(ClosedError):
        fresh_client.compile(MUL_ADD_4)
    buf.delete()  # deleting after the client is gone is a no-op, never a double free


def test_buffer_of_another_client(client: Client, fresh_client: Client) -> None:
    mine = client.buffer_from_host(np.ones(4, np.float32))
    theirs = fresh_client.buffer_from_host(np.ones(4, np.float32))
    exe = client.compile(MUL_ADD_4)
    with pytest.raises(InvalidArgument, match="another client"):
        exe.execute([mine, theirs, mine])
    with pytest.raises(InvalidArgument, match="another client"):
        mine.copy_to(fresh_client.devices[0])
    mine.delete()
    theirs.delete()


MUL_ADD_4 = (Path(__file__).with_name("data") / "mul_add.mlir").read_text()  # a * b + c
