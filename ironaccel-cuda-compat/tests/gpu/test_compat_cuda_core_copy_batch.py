"""The cuda.core compat's batched copies (`utils.copy_batch`, `CopyOptions`) and `Buffer.copy_to/copy_from`'s
options, checked from the host through page-locked memory."""

from __future__ import annotations

import ctypes

import pytest

pytestmark = pytest.mark.backend("cuda")


def _pinned(cc, data: bytes):
    buf = cc.LegacyPinnedMemoryResource().allocate(len(data))
    ctypes.memmove(int(buf.handle), data, len(data))
    return buf


def _read(buf) -> bytes:
    return ctypes.string_at(int(buf.handle), buf.size)


def test_copy_batch_moves_every_pair_in_one_call(cc, device, stream):

    datas = [bytes(range(i, i + 64)) * (i + 1) for i in range(4)]
    srcs = [_pinned(cc, d) for d in datas]
    devs = [device.allocate(len(d), stream=stream) for d in datas]
    back = [cc.LegacyPinnedMemoryResource().allocate(len(d)) for d in datas]
    cc.utils.copy_batch(stream, srcs, devs)                                   # host -> device
    cc.utils.copy_batch(stream, devs, back, options=cc.utils.CopyOptions())  # device -> host
    stream.sync()
    assert [_read(b) for b in back] == datas


def test_copy_batch_options_broadcast_and_pair(cc, device, stream):
    U = cc.utils
    srcs = [_pinned(cc, bytes([i]) * 256) for i in range(3)]
    dsts = [cc.LegacyPinnedMemoryResource().allocate(256) for _ in range(3)]
    opts = [U.CopyOptions(), U.CopyOptions(src_access_order="any", overlap_mode="prefer_overlap_with_compute"),
            U.CopyOptions(src_access_order=U.MemcpySrcAccessOrder.DURING_API_CALL, src_location_hint=cc.Host(),
                          dst_location_hint=device)]
    assert opts[1].src_access_order is U.MemcpySrcAccessOrder.ANY  # strings become the enums
    U.copy_batch(stream, srcs, dsts, options=opts)
    stream.sync()
    assert [_read(d) for d in dsts] == [bytes([i]) * 256 for i in range(3)]
    with pytest.raises(ValueError, match="invalid src_access_order"):
        U.CopyOptions(src_access_order="later")


def test_copy_batch_refuses_what_cuda_core_refuses(cc, device, stream):
    U = cc.utils
    a, b = device.allocate(64, stream=stream), device.allocate(128, stream=stream)
    with pytest.raises(TypeError, match="not a single Buffer"):
        U.copy_batch(stream, a, [b])
    with pytest.raises(ValueError, match="same length"):
        U.copy_batch(stream, [a], [a, b])
    with pytest.raises(ValueError, match="sizes mismatch"):
        U.copy_batch(stream, [a], [b])
    with pytest.raises(ValueError, match="one CopyOptions per copy"):
        U.copy_batch(stream, [a], [a], options=[U.CopyOptions()] * 2)
    with pytest.raises(TypeError, match="LEGACY_DEFAULT_STREAM"):
        U.copy_batch(cc.LEGACY_DEFAULT_STREAM, [a], [a])
    builder = stream.create_graph_builder()
    builder.begin_building()
    try:
        with pytest.raises(TypeError, match="captured into a graph"):
            U.copy_batch(builder, [a], [a])
        with pytest.raises(TypeError, match="capturing stream"):
            U.copy_batch(builder.stream, [a], [a])
    finally:
        builder.end_building()
    U.copy_batch(stream, [], [])  # an empty batch does nothing


def test_buffer_copies_honor_options(cc, device, stream):
    U = cc.utils
    src = _pinned(cc, b"\x05" * 512)
    dst = device.allocate(512, stream=stream)
    back = cc.LegacyPinnedMemoryResource().allocate(512)
    dst.copy_from(src, stream=stream, options=U.CopyOptions(src_access_order="during_api_call"))
    ctypes.memset(int(src.handle), 0, 512)  # read during the call: changing it now changes nothing
    dst.copy_to(back, stream=stream, options=U.CopyOptions(overlap_mode="prefer_overlap_with_compute"))
    stream.sync()
    assert _read(back) == b"\x05" * 512
    with pytest.raises(TypeError, match="CopyOptions"):
        dst.copy_to(back, stream=stream, options="stream")
    with pytest.raises(TypeError, match="LEGACY_DEFAULT_STREAM"):
        dst.copy_to(back, stream=cc.LEGACY_DEFAULT_STREAM, options=U.CopyOptions())
