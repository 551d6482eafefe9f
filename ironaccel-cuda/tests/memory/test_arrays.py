"""CUDA arrays, texture objects and surface objects: copies every way, kernels reading and writing them, bad input."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from helpers import FAKE
from helpers.expect import raises_exactly

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument

pytestmark = pytest.mark.backend("cuda")

# tex_fetch_1d, tex2d_point and surf2d_write are also built into the fake driver (tests/fakecuda/fake_arrays.c);
# the others need a GPU.
SOURCE = r"""
extern "C" __global__ void tex_fetch_1d(float* out, cudaTextureObject_t tex, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1Dfetch<float>(tex, i);
}

extern "C" __global__ void tex2d_point(float* out, cudaTextureObject_t tex, unsigned w, unsigned h) {
    unsigned x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) out[y * w + x] = tex2D<float>(tex, x + 0.5f, y + 0.5f);
}

extern "C" __global__ void surf2d_write(cudaSurfaceObject_t surf, unsigned w, unsigned h) {
    unsigned x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) surf2Dwrite<float>(x + 1000.0f * y, surf, x * sizeof(float), y);
}

extern "C" __global__ void tex2d_sample(float* out, cudaTextureObject_t tex, const float* u, const float* v,
                                        unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<float>(tex, u[i], v[i]);
}

extern "C" __global__ void tex1d_sample(float* out, cudaTextureObject_t tex, const float* u, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1D<float>(tex, u[i]);
}

extern "C" __global__ void tex2d_layered_point(float* out, cudaTextureObject_t tex, unsigned w, unsigned h,
                                               unsigned layers) {
    unsigned x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    for (unsigned l = 0; l < layers; l++) out[(l * h + y) * w + x] = tex2DLayered<float>(tex, x + 0.5f, y + 0.5f, l);
}
"""


@pytest.fixture(scope="module")
def code():
    return cu.Program(SOURCE).compile("cubin", arch=cu.Device(0))


@pytest.fixture
def mod(dev, code):
    m = dev.load_module(code)
    yield m
    m.close()


def values(shape, dtype, seed=0):
    """Distinct values of `dtype` that fill `shape` (all bytes matter: a swapped or shifted row shows)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)


def aligned(dev, n, dtype="float32"):
    """(owner, view): `n` elements of device memory starting on the device's texture alignment."""
    align = dev.attribute("TEXTURE_ALIGNMENT")
    itemsize = np.dtype(dtype).itemsize
    owner = dev.alloc(n + align // itemsize, dtype)
    skip = (-owner.ptr) % align // itemsize
    view = owner[skip: skip + n]
    assert view.ptr % align == 0
    return owner, view


def raw_descriptor(array):
    """What the driver says the array is (cuArray3DGetDescriptor)."""
    from cuda.bindings import driver as drv

    err, desc = drv.cuArray3DGetDescriptor(drv.CUarray(array.handle))
    assert int(err) == 0, err
    return desc


# -- copies ---------------------------------------------------------------------------------------------------


EXTENTS = [
    # (shape, kwargs, driver's (Width, Height, Depth))
    ((37,), {}, (37, 0, 0)),
    ((19, 23), {}, (23, 19, 0)),
    ((5, 7, 11), {}, (11, 7, 5)),
    ((4, 29), {"layered": True}, (29, 0, 4)),
    ((3, 6, 10), {"layered": True, "surface": True}, (10, 6, 3)),
    ((6, 8, 8), {"cubemap": True}, (8, 8, 6)),
    ((12, 4, 4), {"cubemap": True, "layered": True}, (4, 4, 12)),
    ((16, 16), {"texture_gather": True}, (16, 16, 0)),
]
FORMATS = [("uint8", 0x01), ("uint16", 0x02), ("uint32", 0x03), ("int8", 0x08), ("int16", 0x09), ("int32", 0x0A),
           ("float16", 0x10), ("float32", 0x20)]


@pytest.mark.parametrize("shape,kwargs,extent", EXTENTS, ids=lambda v: str(v))
def test_round_trip_of_every_extent(dev, shape, kwargs, extent):
    arr = dev.create_array(shape, "float32", 2, **kwargs)
    assert arr.shape == shape and arr.host_shape == (*shape, 2) and arr.channels == 2
    assert arr.dtype.value == "float32" and arr.nbytes == int(np.prod(shape)) * 2 * 4
    for name in ("surface", "layered", "cubemap", "texture_gather"):
        assert getattr(arr, name) is kwargs.get(name, False)
    desc = raw_descriptor(arr)
    assert (desc.Width, desc.Height, desc.Depth) == extent
    assert int(desc.Format) == 0x20 and desc.NumChannels == 2
    flags = (kwargs.get("layered", False) * 0x1 | kwargs.get("surface", False) * 0x2 | kwargs.get("cubemap", False)
             * 0x4 | kwargs.get("texture_gather", False) * 0x8)
    assert desc.Flags & 0xF == flags
    data = values(arr.host_shape, "float32", seed=len(shape))
    arr.copy_from(data)
    out = arr.copy_to()
    assert out.shape == arr.host_shape and out.dtype == np.float32
    np.testing.assert_array_equal(out, data)
    arr.close()
    assert arr.closed


@pytest.mark.parametrize("dtype,fmt", FORMATS)
@pytest.mark.parametrize("channels", [1, 2, 4])
def test_round_trip_of_every_format_and_channel_count(dev, dtype, fmt, channels):
    arr = dev.create_array((9, 13), dtype, channels)
    desc = raw_descriptor(arr)
    assert int(desc.Format) == fmt and desc.NumChannels == channels
    data = values(arr.host_shape, dtype, seed=fmt * channels)
    arr.copy_from(data)
    out = np.zeros(arr.host_shape, dtype)
    assert arr.copy_to_host(out) is out
    np.testing.assert_array_equal(out.view(np.uint8), data.view(np.uint8))  # bit for bit, NaNs of float16 included
    arr.close()


def test_dtype_given_as_numpy_type_and_one_channel_host_shape(dev):
    arr = dev.create_array((3, 4, 5), np.uint16)
    assert arr.dtype.value == "uint16" and arr.host_shape == (3, 4, 5)
    data = values((3, 4, 5), "uint16")
    arr.copy_from(data)
    np.testing.assert_array_equal(arr.copy_to(), data)
    arr.close()


def test_strided_host_arrays_and_async_copies(dev):
    big = values((40, 50, 4), "uint8")
    tile = big[3:33:3, 5:25]  # strided rows of a sub-rectangle; each row's texels are contiguous
    arr = dev.create_array(tile.shape[:2], "uint8", 4)
    s = dev.create_stream()
    arr.copy_from(tile, stream=s)
    out = np.zeros((40, 50, 4), np.uint8)
    target = out[10:30:2, 20:40]
    arr.copy_to_host(target, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(target, tile)
    assert out[:10].sum() == 0 and out[11::2].sum() == 0 and out[:, :20].sum() == 0  # nothing else touched
    vol = values((4, 6, 8), "float32")
    layered = dev.create_array((4, 8), "float32", layered=True)  # (layers, width): a slice per layer
    layered.copy_from(vol[:, 2, :])  # slices 6 rows apart: each layer's row is a strided slice of the volume
    np.testing.assert_array_equal(layered.copy_to(), vol[:, 2, :])
    arr3 = dev.create_array((4, 3, 8), "float32")
    arr3.copy_from(vol[:, 1:4, :])  # slices of 6 rows, 3 of them used
    np.testing.assert_array_equal(arr3.copy_to(), vol[:, 1:4, :])
    for x in (arr, layered, arr3, s):
        x.close()


def test_device_memory_to_array_and_back(dev):
    data = values((24, 31, 2), "int16")
    src = dev.alloc(data.size, "int16")
    src.copy_from(data.ravel())
    arr = dev.create_array((24, 31), "int16", 2)
    arr.copy_from(src)  # packed rows of a DeviceBuf
    np.testing.assert_array_equal(arr.copy_to(), data)
    dst = dev.alloc(data.size, "int16")
    dst.memset(0)
    assert arr.copy_to(dst) is dst
    np.testing.assert_array_equal(dst.copy_to_host().reshape(data.shape), data)
    pitched = dev.alloc_pitched((24, 62), "int16")  # rows of width x channels values, padded
    assert arr.copy_to(pitched) is pitched
    np.testing.assert_array_equal(pitched.copy_to_host(), data.reshape(24, 62))
    second = dev.create_array((24, 31), "int16", 2)
    second.copy_from(pitched)
    third = dev.create_array((24, 31), "int16", 2)
    third.copy_from(second)  # array to array
    np.testing.assert_array_equal(third.copy_to(), data)
    vol = values((3, 5, 7), "float32")
    pv = dev.alloc_pitched((3, 5, 7), "float32")
    pv.copy_from(vol)
    arr3 = dev.create_array((3, 5, 7), "float32")
    arr3.copy_from(pv)  # 3-D pitched
    np.testing.assert_array_equal(arr3.copy_to(), vol)
    s = dev.create_stream()
    back = dev.alloc(vol.size, "float32", stream=s)
    arr3.copy_to(back, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(back.copy_to_host().reshape(vol.shape), vol)
    for x in (src, arr, dst, pitched, second, third, pv, arr3, back, s):
        x.close()


# -- textures and surfaces in kernels -------------------------------------------------------------------------


def test_tex1dfetch_over_linear_memory(dev, mod):
    n = 1000
    data = values(n, "float32")
    owner, view = aligned(dev, n)
    view.copy_from(data)
    tex = dev.create_texture(view)
    assert tex.resource is view and tex.channels == 1 and isinstance(tex.handle, int) and tex.handle != 0
    out = dev.alloc(n + 24, "float32")
    mod.function("tex_fetch_1d").launch(5, 256, out, tex.handle, n + 24)  # the handle is an int argument
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[:n], data)
    np.testing.assert_array_equal(got[n:], 0)  # tex1Dfetch past the end reads 0
    out.memset(0)
    mod.function("tex_fetch_1d").launch(4, 256, out, np.uint64(tex.handle), np.uint32(n))  # or a numpy uint64
    np.testing.assert_array_equal(out.copy_to_host()[:n], data)
    tex.close()
    assert tex.closed
    for x in (out, owner):
        x.close()


def test_tex2d_point_reads_an_array_and_pitched_memory(dev, mod):
    h, w = 37, 45
    data = values((h, w), "float32")
    arr = dev.create_array((h, w), "float32")
    arr.copy_from(data)
    out = dev.alloc(h * w, "float32")
    grid = ((w + 15) // 16, (h + 15) // 16, 1)
    with dev.create_texture(arr) as tex:
        mod.function("tex2d_point").launch(grid, (16, 16, 1), out, tex.handle, w, h)
        np.testing.assert_array_equal(out.copy_to_host().reshape(h, w), data)
    assert tex.closed
    pitch = 256  # rows 256 bytes apart, as TEXTURE_PITCH_ALIGNMENT allows, in memory on the texture alignment
    owner, view = aligned(dev, pitch // 4 * h)
    pitched = cu.PitchedBuf.view_of(view, (h, w), pitch=pitch)
    pitched.copy_from(data)
    out.memset(0)
    with dev.create_texture(pitched) as ptex:
        from cuda.bindings import driver as drv

        err, res = drv.cuTexObjectGetResourceDesc(ptex.handle)
        assert int(err) == 0 and int(res.resType) == 3  # CU_RESOURCE_TYPE_PITCH2D
        assert (res.res.pitch2D.width, res.res.pitch2D.height, res.res.pitch2D.pitchInBytes) == (w, h, pitch)
        mod.function("tex2d_point").launch(grid, (16, 16, 1), out, ptex.handle, w, h)
        np.testing.assert_array_equal(out.copy_to_host().reshape(h, w), data)
    if not FAKE:  # the driver's own pitched memory is texture-aligned (the fake's cuMemAlloc is 256-byte aligned)
        own = dev.alloc_pitched((h, w), "float32")
        own.copy_from(data)
        out.memset(0)
        with dev.create_texture(own) as otex:
            mod.function("tex2d_point").launch(grid, (16, 16, 1), out, otex.handle, w, h)
        np.testing.assert_array_equal(out.copy_to_host().reshape(h, w), data)
        own.close()
    for x in (arr, out, owner):
        x.close()


def test_a_kernel_writes_a_surface(dev, mod):
    h, w = 21, 70
    arr = dev.create_array((h, w), "float32", surface=True)
    arr.copy_from(np.full((h, w), -1, np.float32))
    surf = dev.create_surface(arr)
    assert surf.array is arr and isinstance(surf.handle, int)
    mod.function("surf2d_write").launch(((w + 15) // 16, (h + 15) // 16, 1), (16, 16, 1), surf.handle, w, h)
    y, x = np.mgrid[0:h, 0:w]
    np.testing.assert_array_equal(arr.copy_to(), (x + 1000 * y).astype(np.float32))
    # read back through a texture of the same array too
    out = dev.alloc(h * w, "float32")
    tex = dev.create_texture(arr)
    mod.function("tex2d_point").launch(((w + 15) // 16, (h + 15) // 16, 1), (16, 16, 1), out, tex.handle, w, h)
    np.testing.assert_array_equal(out.copy_to_host().reshape(h, w), x + 1000 * y)
    arr.close()  # closes its texture and surface first
    assert surf.closed and tex.closed
    with pytest.raises(ClosedError):
        surf.handle
    with pytest.raises(ClosedError):
        tex.handle
    out.close()


def _bilinear(data, u, v):
    """tex2D with linear filtering, normalized coordinates and clamp addressing, in numpy, with exact weights."""
    h, w = data.shape
    x, y = u * w - 0.5, v * h - 0.5
    x0, y0 = np.floor(x), np.floor(y)
    ax, ay = x - x0, y - y0

    def at(yy, xx):
        return data[np.clip(yy, 0, h - 1).astype(int), np.clip(xx, 0, w - 1).astype(int)]

    return ((1 - ax) * (1 - ay) * at(y0, x0) + ax * (1 - ay) * at(y0, x0 + 1) + (1 - ax) * ay * at(y0 + 1, x0)
            + ax * ay * at(y0 + 1, x0 + 1))


@pytest.mark.skipif(FAKE, reason="the fake driver does not filter")
def test_linear_filtering_with_normalized_coordinates_matches_numpy(dev, mod):
    h, w, n = 24, 40, 4096
    data = np.random.default_rng(3).random((h, w), dtype=np.float32)
    arr = dev.create_array((h, w), "float32")
    arr.copy_from(data)
    tex = dev.create_texture(arr, filter_mode="linear", normalized_coords=True)
    assert tex.filter_mode == "linear" and tex.normalized_coords and tex.address_mode == ("clamp",) * 3
    rng = np.random.default_rng(4)
    u = rng.uniform(-0.1, 1.1, n).astype(np.float32)
    v = rng.uniform(-0.1, 1.1, n).astype(np.float32)
    du, dv, out = dev.alloc(n, "float32"), dev.alloc(n, "float32"), dev.alloc(n, "float32")
    du.copy_from(u)
    dv.copy_from(v)
    mod.function("tex2d_sample").launch(n // 256, 256, out, tex.handle, du, dv, n)
    want = _bilinear(data.astype(np.float64), u.astype(np.float64), v.astype(np.float64))
    got = out.copy_to_host()
    # The hardware keeps 8 fractional bits of each weight: up to 1/256 of a texel step off per axis (data in [0, 1)).
    err = np.abs(got - want)
    assert err.max() <= 1 / 128 and err.mean() < 1e-3, (err.max(), err.mean())
    # point filtering of the same array, same coordinates: the nearest texel exactly (and far from the filtered)
    with dev.create_texture(arr, normalized_coords=True) as point:
        mod.function("tex2d_sample").launch(n // 256, 256, out, point.handle, du, dv, n)
    yy = np.clip(np.floor(v * h), 0, h - 1).astype(int)
    xx = np.clip(np.floor(u * w), 0, w - 1).astype(int)
    np.testing.assert_array_equal(out.copy_to_host(), data[yy, xx])
    assert np.abs(data[yy, xx] - want).max() > 0.1
    for x in (tex, arr, du, dv, out):
        x.close()


@pytest.mark.skipif(FAKE, reason="the fake driver does not address")
@pytest.mark.parametrize("mode", ["wrap", "clamp", "mirror", "border"])
def test_address_modes_at_texel_centres_match_numpy(dev, mod, mode):
    w = 16
    data = np.arange(1, w + 1, dtype=np.float32) * 10
    arr = dev.create_array((w,), "float32")
    arr.copy_from(data)
    tex = dev.create_texture(arr, address_mode=mode, normalized_coords=True, border_color=(-7.0, 0, 0, 0))
    k = np.arange(-2 * w, 3 * w)
    u = ((k + 0.5) / w).astype(np.float32)
    du, out = dev.alloc(k.size, "float32"), dev.alloc(k.size, "float32")
    du.copy_from(u)
    mod.function("tex1d_sample").launch(1, 256, out, tex.handle, du, k.size)
    if mode == "wrap":
        want = data[k % w]
    elif mode == "clamp":
        want = data[np.clip(k, 0, w - 1)]
    elif mode == "mirror":
        m = k % (2 * w)
        want = data[np.where(m < w, m, 2 * w - 1 - m)]
    else:
        want = np.where((k >= 0) & (k < w), data[np.clip(k, 0, w - 1)], -7.0)
    np.testing.assert_array_equal(out.copy_to_host(), want)
    for x in (tex, arr, du, out):
        x.close()


@pytest.mark.skipif(FAKE, reason="the fake driver's kernels read float texels only")
def test_normalized_float_reads_and_layered_textures(dev, mod):
    h, w = 9, 20
    data = values((h, w), "uint8")
    arr = dev.create_array((h, w), "uint8")
    arr.copy_from(data)
    out = dev.alloc(3 * h * w, "float32")
    grid = ((w + 15) // 16, (h + 15) // 16, 1)
    with dev.create_texture(arr, read_mode="normalized_float") as tex:
        mod.function("tex2d_point").launch(grid, (16, 16, 1), out, tex.handle, w, h)
    np.testing.assert_allclose(out.copy_to_host()[: h * w].reshape(h, w), data / 255.0, rtol=1e-6)
    layers = values((3, h, w), "float32")
    lay = dev.create_array((3, h, w), "float32", layered=True)
    lay.copy_from(layers)
    with dev.create_texture(lay) as ltex:
        mod.function("tex2d_layered_point").launch(grid, (16, 16, 1), out, ltex.handle, w, h, 3)
    np.testing.assert_array_equal(out.copy_to_host().reshape(3, h, w), layers)
    for x in (arr, lay, out):
        x.close()


def test_the_texture_descriptor_reaches_the_driver(dev):
    from cuda.bindings import driver as drv

    arr = dev.create_array((8, 8, 8), "uint16", 4)
    tex = dev.create_texture(arr, address_mode=("wrap", "mirror", "border"), filter_mode="linear",
                             read_mode="normalized_float", normalized_coords=True, border_color=(0.25, 0.5, 0.75, 1))
    assert tex.address_mode == ("wrap", "mirror", "border") and tex.read_mode == "normalized_float"
    assert tex.border_color == (0.25, 0.5, 0.75, 1.0) and tex.channels == 4
    err, td = drv.cuTexObjectGetTextureDesc(tex.handle)
    assert int(err) == 0
    assert [int(m) for m in td.addressMode] == [0, 2, 3]
    assert int(td.filterMode) == 1
    assert td.flags & 0x3 == 0x2  # normalized coordinates, not read as integer
    # (the driver does not report the border colour back: H200, driver 580.159; test_address_modes_... reads it)
    err, res = drv.cuTexObjectGetResourceDesc(tex.handle)
    assert int(err) == 0 and int(res.resType) == 0 and int(res.res.array.hArray) == arr.handle
    element = dev.create_texture(arr, address_mode="border")  # integers read as stored, one mode for x, y, z
    err, td = drv.cuTexObjectGetTextureDesc(element.handle)
    assert [int(m) for m in td.addressMode] == [3, 3, 3] and td.flags & 0x3 == 0x1  # CU_TRSF_READ_AS_INTEGER
    flt = dev.create_array((8,), "float32")
    plain = dev.create_texture(flt, address_mode=["border"])  # the rest: clamp
    err, td = drv.cuTexObjectGetTextureDesc(plain.handle)
    assert [int(m) for m in td.addressMode] == [3, 1, 1] and td.flags & 0x3 == 0  # floats: no integer flag
    arr.close()
    assert tex.closed and element.closed and not plain.closed
    plain.close()
    flt.close()


# -- lifetime ----------------------------------------------------------------------------------------------


def test_closed_objects_and_gc(dev):
    arr = dev.create_array((16, 16), "float32", surface=True)
    tex, surf = dev.create_texture(arr), dev.create_surface(arr)
    handles = (tex.handle, surf.handle)
    tex.close()
    tex.close()
    arr.close()
    arr.close()
    assert surf.closed and repr(arr).startswith("<Array closed")
    if FAKE:  # the driver refuses what was destroyed (on a GPU a stale handle may be reused)
        from cuda.bindings import driver as drv

        assert int(drv.cuTexObjectDestroy(handles[0])[0]) == 1  # CUDA_ERROR_INVALID_VALUE
        assert int(drv.cuSurfObjectDestroy(handles[1])[0]) == 1
    free = dev.memory_info()[0]
    for _ in range(4):  # 16 MiB each, dropped without close (with a texture holding the array)
        a = dev.create_array((1024, 4096), "float32")
        t = dev.create_texture(a)
        del a, t
    gc.collect()
    dev.synchronize()
    assert dev.memory_info()[0] >= free - (8 << 20)
    with dev.create_array((4,), "int8") as small:
        assert not small.closed
    assert small.closed


# -- bad input ----------------------------------------------------------------------------------------------


def _device_still_works(dev):
    arr = dev.create_array((3, 5), "int32")
    data = values((3, 5), "int32")
    arr.copy_from(data)
    np.testing.assert_array_equal(arr.copy_to(), data)
    arr.close()


def test_bad_array_descriptions_are_refused_before_the_driver(dev):
    op = "cuArray3DCreate"
    for shape in ((), (0,), (4, 0), (-3, 4), (2, 3, 4, 5), [4, 4], (4, 1.5), (True, 4), "4", None):
        raises_exactly(InvalidArgument, op, dev.create_array, shape, "float32")
    for dtype in ("float64", "int64", "uint64", "complex64", "bool", "no-such-type"):
        raises_exactly(InvalidArgument, op, dev.create_array, (4, 4), dtype)
    for channels in (0, 3, 5, -1, 2.0, True, "2"):
        raises_exactly(InvalidArgument, op, dev.create_array, (4, 4), "float32", channels)
    raises_exactly(InvalidArgument, op, dev.create_array, (8, 8), "float32", cubemap=True)  # 2-D
    raises_exactly(InvalidArgument, op, dev.create_array, (6, 8, 9), "float32", cubemap=True)  # not square
    raises_exactly(InvalidArgument, op, dev.create_array, (5, 8, 8), "float32", cubemap=True)  # not 6 faces
    raises_exactly(InvalidArgument, op, dev.create_array, (9, 8, 8), "float32", cubemap=True, layered=True)
    raises_exactly(InvalidArgument, op, dev.create_array, (8,), "float32", layered=True)
    raises_exactly(InvalidArgument, op, dev.create_array, (4, 8, 8), "float32", texture_gather=True)
    raises_exactly(InvalidArgument, op, dev.create_array, (4, 8), "float32", surface=1)
    raises_exactly(InvalidArgument, op, dev.create_array, (4, 8), "float32", stream="s")
    raises_exactly(InvalidArgument, op, dev.create_array, (1 << 20, 1 << 20, 1 << 20), "float32")  # > the device
    with pytest.raises(TypeError):
        cu.Array()
    _device_still_works(dev)


def test_an_extent_past_the_devices_limits_is_the_drivers_invalid_value(dev):
    info = raises_exactly(InvalidArgument, "cuArray3DCreate", dev.create_array, (1 << 20,), "float32")
    assert info.code == 1 and info.code_name == "CUDA_ERROR_INVALID_VALUE"
    _device_still_works(dev)


def test_bad_copies_are_refused(dev):
    op = "cuMemcpy3DAsync"
    arr = dev.create_array((6, 10), "float32", 2)
    ok = values((6, 10, 2), "float32")
    for bad in (np.zeros((6, 10), np.float32), np.zeros((6, 10, 4), np.float32), np.zeros((10, 6, 2), np.float32),
                np.zeros((6, 10, 2), np.float64), np.zeros((6, 10, 2), np.int32)):
        raises_exactly(InvalidArgument, op, arr.copy_from, bad)
        raises_exactly(InvalidArgument, op, arr.copy_to, bad)
    split = np.zeros((6, 10, 4), np.float32)[:, :, ::2]  # channels not next to each other
    raises_exactly(InvalidArgument, op, arr.copy_from, split)
    frozen = ok.copy()
    frozen.flags.writeable = False
    raises_exactly(InvalidArgument, op, arr.copy_to, frozen)
    raises_exactly(InvalidArgument, op, arr.copy_to_host, [[0.0] * 20] * 6)
    raises_exactly(InvalidArgument, op, arr.copy_from, ok.tolist())
    raises_exactly(InvalidArgument, op, arr.copy_from, ok, stream="s")
    raises_exactly(InvalidArgument, op, arr.copy_from, dev.alloc(ok.size, "int32"))  # dtype
    raises_exactly(InvalidArgument, op, arr.copy_from, dev.alloc(ok.size - 1, "float32"))  # size
    raises_exactly(InvalidArgument, op, arr.copy_from, dev.alloc_pitched((6, 10), "float32"))  # rows of 10, not 20
    raises_exactly(InvalidArgument, op, arr.copy_from, dev.create_array((6, 10), "float32", 4))
    raises_exactly(InvalidArgument, op, arr.copy_from, dev.create_array((10, 6), "float32", 2))
    gone = dev.alloc(ok.size, "float32")
    gone.close()
    raises_exactly(ClosedError, op, arr.copy_from, gone)
    gone_array = dev.create_array((6, 10), "float32", 2)
    gone_array.close()
    raises_exactly(ClosedError, op, arr.copy_from, gone_array)
    raises_exactly(ClosedError, op, gone_array.copy_from, ok)
    raises_exactly(ClosedError, op, gone_array.copy_to)
    raises_exactly(ClosedError, op, gone_array.copy_to_host)
    raises_exactly(ClosedError, "Array.handle", lambda: gone_array.handle)
    arr.copy_from(ok)  # nothing above reached the array
    np.testing.assert_array_equal(arr.copy_to(), ok)
    arr.close()
    _device_still_works(dev)


def test_bad_textures_and_surfaces_are_refused(dev):
    op = "cuTexObjectCreate"
    arr = dev.create_array((8, 8), "float32")
    ints = dev.create_array((8, 8), "int32")
    u8 = dev.create_array((8, 8), "uint8")
    for mode in ("repeat", "", None, 3, ("wrap",) * 4, (), ["clamp", "nope"]):
        raises_exactly(InvalidArgument, op, dev.create_texture, arr, address_mode=mode, normalized_coords=True)
    raises_exactly(InvalidArgument, op, dev.create_texture, arr, address_mode="wrap")  # needs normalized coords
    raises_exactly(InvalidArgument, op, dev.create_texture, arr, address_mode=("clamp", "mirror"))
    raises_exactly(InvalidArgument, op, dev.create_texture, arr, filter_mode="bilinear")
    raises_exactly(InvalidArgument, op, dev.create_texture, arr, read_mode="float")
    raises_exactly(InvalidArgument, op, dev.create_texture, arr, read_mode="normalized_float")  # floats: as stored
    raises_exactly(InvalidArgument, op, dev.create_texture, ints, read_mode="normalized_float")  # 32-bit ints too
    raises_exactly(InvalidArgument, op, dev.create_texture, ints, filter_mode="linear")  # filtering returns floats
    raises_exactly(InvalidArgument, op, dev.create_texture, u8, filter_mode="linear")  # ... unless normalized
    raises_exactly(InvalidArgument, op, dev.create_texture, arr, normalized_coords=1)
    for color in ("red", (1, 2, 3), (1, 2, 3, float("nan")), None, (True, 0, 0, 0)):
        raises_exactly(InvalidArgument, op, dev.create_texture, arr, border_color=color)
    raises_exactly(InvalidArgument, op, dev.create_texture, arr, channels=2)  # the array has one
    raises_exactly(InvalidArgument, op, dev.create_texture, np.zeros(8, np.float32))
    owner, view = aligned(dev, 64)
    raises_exactly(InvalidArgument, op, dev.create_texture, view, filter_mode="linear")  # linear memory: fetch only
    raises_exactly(InvalidArgument, op, dev.create_texture, view, normalized_coords=True)
    raises_exactly(InvalidArgument, op, dev.create_texture, view, channels=3)
    raises_exactly(InvalidArgument, op, dev.create_texture, view[:63], channels=2)  # not whole texels
    info = raises_exactly(InvalidArgument, op, dev.create_texture, view[1:])  # off the texture alignment
    assert "TEXTURE_ALIGNMENT" in str(info)
    f64 = dev.alloc(64, "float64")
    raises_exactly(InvalidArgument, op, dev.create_texture, f64)  # no float64 textures
    raises_exactly(InvalidArgument, op, dev.create_texture, cu.PitchedBuf.view_of(view, (3, 16), pitch=64 + 4))
    raises_exactly(InvalidArgument, op, dev.create_texture, cu.PitchedBuf.view_of(view, (2, 2, 16)))  # 3-D
    gone = dev.create_array((8, 8), "float32")
    gone.close()
    raises_exactly(ClosedError, op, dev.create_texture, gone)
    closed_buf = dev.alloc(64, "float32")
    closed_buf.close()
    raises_exactly(ClosedError, op, dev.create_texture, closed_buf)
    sop = "cuSurfObjectCreate"
    info = raises_exactly(InvalidArgument, sop, dev.create_surface, arr)  # made without surface=True
    assert "surface=True" in str(info)
    raises_exactly(InvalidArgument, sop, dev.create_surface, view)
    raises_exactly(ClosedError, sop, dev.create_surface, gone)
    with pytest.raises(TypeError):
        cu.TextureObject()
    with pytest.raises(TypeError):
        cu.SurfaceObject()
    with dev.create_texture(arr) as tex:  # the device and the array still work
        assert tex.handle
    for x in (arr, ints, u8, owner, f64):
        x.close()
    _device_still_works(dev)


def test_a_closed_device_handle_refuses(dev):
    other = cu.Device(dev.ordinal)
    arr = other.create_array((4,), "float32")
    other.close()
    raises_exactly(ClosedError, "cuArray3DCreate", other.create_array, (4,), "float32")
    raises_exactly(ClosedError, "cuTexObjectCreate", other.create_texture, arr)
    raises_exactly(ClosedError, "cuMemcpy3DAsync", arr.copy_from, np.zeros(4, np.float32))
    arr.close()  # the array itself still closes
    assert arr.closed
    _device_still_works(dev)
