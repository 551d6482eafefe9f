"""Issue 38's proof: ten kernels written once in plain Slang, each run on every GPU backend and checked against numpy.

saxpy; a reduction through groupshared memory; a subgroup (wave) reduction; a struct-parameter kernel; a 2-D
stencil; f16 arithmetic; atomics (a histogram); a generic kernel specialized by a constant; a tiled matrix multiply
through shared memory; a prefix sum.  Where a device lacks what a kernel needs (subgroups, f16), the test reads
that from the device's capabilities and expects the typed error naming it -- never a blanket skip.  On CI the
backends are lavapipe, llvmpipe and wgpu on lavapipe; on the H200 CUDA too, with IRONACCEL_REQUIRE making skips
failures.
"""

from __future__ import annotations

import numpy as np
import pytest

import ironaccel
from ironaccel import CapabilityFlags
from ironaccel.errors import CompileError, InvalidArgument, NotAvailable, Unsupported
from ironaccel.testing.pytest_plugin import required_backends
from ironaccel_slang import INSTALL, Slang, cuda_include, find_slangc

GPU = [pytest.param(b, marks=pytest.mark.backend(b), id=b) for b in ("vulkan", "webgpu", "opengl", "cuda")]
RNG = np.random.default_rng(38)


@pytest.fixture
def device(request):
    if find_slangc() is None:
        if required_backends():
            pytest.fail(f"no slangc here ({INSTALL}); IRONACCEL_REQUIRE is set", pytrace=False)
        pytest.skip(f"no slangc here ({INSTALL})")
    dev = ironaccel.open(request.param, 0)
    try:
        yield dev
    finally:
        dev.close()


def run(dev, source: Slang, entry: str, arrays, groups, params=(), out: int = 0, **pipeline_args) -> np.ndarray:
    """Upload `arrays`, dispatch `entry` over them, download buffer `out` (every buffer freed)."""
    pipeline = dev.pipeline(source, entry, buffers=len(arrays), **pipeline_args)
    bufs = [dev.upload(np.ascontiguousarray(a)) for a in arrays]
    try:
        dev.dispatch(pipeline, bufs, groups, params)
        return dev.download(bufs[out])
    finally:
        for b in bufs:
            b.close()


def gl_extensions(dev) -> set[str]:
    return set(dev.ctx.extensions)


def has_waves(dev) -> bool:
    """Subgroup arithmetic, as each backend says it: Vulkan's subgroup operations, the GL extension Slang's
    GLSL requires, WebGPU's "subgroup" feature, CUDA's warps."""
    caps, extras = dev.descriptor.capabilities, dev.descriptor.extras
    if dev.backend == "opengl":
        return {"GL_KHR_shader_subgroup_basic", "GL_KHR_shader_subgroup_arithmetic"} <= gl_extensions(dev)
    if dev.backend == "vulkan":
        return CapabilityFlags.SUBGROUPS in caps and "arithmetic" in extras.get("subgroup_operations", ())
    return CapabilityFlags.SUBGROUPS in caps


def has_f16(dev) -> bool:
    """16-bit float arithmetic and storage: Vulkan's shaderFloat16, WebGPU's "shader-f16", the GL extensions
    Slang's GLSL requires, CUDA's compute capability (5.3 and up)."""
    if dev.backend == "opengl":
        return {"GL_EXT_shader_explicit_arithmetic_types", "GL_EXT_shader_16bit_storage"} <= gl_extensions(dev)
    return CapabilityFlags.FP16 in dev.descriptor.capabilities


# 1. saxpy ------------------------------------------------------------------------------------------------------

SAXPY = Slang("""
[shader("compute")]
[numthreads(64, 1, 1)]
void saxpy(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform StructuredBuffer<float> x,
           uniform float a, uniform uint n)
{
    if (tid.x < n)
        y[tid.x] = a * x[tid.x] + y[tid.x];
}
""")


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_saxpy(device):
    n = 4099
    x, y = RNG.integers(-50, 50, n).astype(np.float32), RNG.integers(-50, 50, n).astype(np.float32)
    got = run(device, SAXPY, "saxpy", [y, x], -(-n // 64), {"a": -1.5, "n": n})
    np.testing.assert_array_equal(got, np.float32(-1.5) * x + y)


# 2. reduction through groupshared memory ----------------------------------------------------------------------

REDUCE = Slang("""
groupshared float partial[256];

[shader("compute")]
[numthreads(256, 1, 1)]
void reduce_sum(uint3 tid: SV_DispatchThreadID, uint3 lid: SV_GroupThreadID, uint3 gid: SV_GroupID,
                uniform RWStructuredBuffer<float> sums, uniform StructuredBuffer<float> x, uniform uint n)
{
    partial[lid.x] = tid.x < n ? x[tid.x] : 0.0;
    GroupMemoryBarrierWithGroupSync();
    for (uint s = 128; s > 0; s >>= 1) {
        if (lid.x < s)
            partial[lid.x] += partial[lid.x + s];
        GroupMemoryBarrierWithGroupSync();
    }
    if (lid.x == 0)
        sums[gid.x] = partial[0];
}
""")


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_groupshared_reduction(device):
    n = 5000
    groups = -(-n // 256)
    x = RNG.integers(-1000, 1000, n).astype(np.float32)  # integers: every partial sum is exact in float32
    got = run(device, REDUCE, "reduce_sum", [np.zeros(groups, np.float32), x], groups, {"n": n})
    want = np.pad(x, (0, groups * 256 - n)).reshape(groups, 256).sum(axis=1)
    np.testing.assert_array_equal(got, want)


# 3. subgroup (wave) reduction ---------------------------------------------------------------------------------

WAVE = Slang("""
[shader("compute")]
[numthreads(64, 1, 1)]
void wave_sum(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<Atomic<uint>> total,
              uniform RWStructuredBuffer<uint> lanes, uniform StructuredBuffer<uint> x, uniform uint n)
{
    uint v = tid.x < n ? x[tid.x] : 0;
    uint s = WaveActiveSum(v);
    uint m = WaveActiveMax(v);
    lanes[tid.x] = WaveGetLaneCount();
    if (WaveGetLaneIndex() == 0) {  // every lane is active here: lane 0 speaks for its wave
        total[0].add(s);
        total[1].max(m);
    }
}
""")


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_wave_reduction(device):
    n = 1000
    groups = -(-n // 64)
    x = RNG.integers(0, 1 << 16, n).astype(np.uint32)
    arrays = [np.zeros(2, np.uint32), np.zeros(groups * 64, np.uint32), x]
    if not has_waves(device):
        with pytest.raises(Unsupported, match="subgroup"):
            run(device, WAVE, "wave_sum", arrays, groups, {"n": n})
        return
    total = run(device, WAVE, "wave_sum", arrays, groups, {"n": n})
    assert total.tolist() == [int(x.sum()), int(x.max())]
    lanes = run(device, WAVE, "wave_sum", arrays, groups, {"n": n}, out=1)
    width = int(lanes[0])
    assert (lanes == width).all() and width & (width - 1) == 0 and 1 <= width <= 128


# 4. struct parameters -----------------------------------------------------------------------------------------

AFFINE = Slang("""
struct Range { float lo; float hi; };
struct Transform { float2 scale; float2 shift; Range clip; uint n; };

[shader("compute")]
[numthreads(64, 1, 1)]
void transform(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float2> points, uniform Transform t)
{
    if (tid.x < t.n)
        points[tid.x] = clamp(points[tid.x] * t.scale + t.shift, t.clip.lo, t.clip.hi);
}
""")


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_struct_parameters(device):
    n = 300
    points = RNG.integers(-20, 20, (n, 2)).astype(np.float32)
    t = {"scale": (2.0, -0.5), "shift": (1.0, 3.0), "clip": {"lo": -10.0, "hi": 12.0}, "n": n}
    got = run(device, AFFINE, "transform", [points], -(-n // 64), {"t": t}).reshape(n, 2)
    want = np.clip(points * np.float32([2.0, -0.5]) + np.float32([1.0, 3.0]), -10.0, 12.0)
    np.testing.assert_array_equal(got, want)


# 5. 2-D stencil -----------------------------------------------------------------------------------------------

LAPLACE = Slang("""
[shader("compute")]
[numthreads(8, 8, 1)]
void laplace(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> out, uniform StructuredBuffer<float> u,
             uniform uint2 size)
{
    uint x = tid.x, y = tid.y;
    if (x >= size.x || y >= size.y)
        return;
    uint i = y * size.x + x;
    if (x == 0 || y == 0 || x == size.x - 1 || y == size.y - 1)
        out[i] = u[i];
    else
        out[i] = u[i - 1] + u[i + 1] + u[i - size.x] + u[i + size.x] - 4.0 * u[i];
}
""")


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_2d_stencil(device):
    h, w = 45, 70  # neither a multiple of the 8x8 workgroup
    u = RNG.integers(-100, 100, (h, w)).astype(np.float32)
    got = run(device, LAPLACE, "laplace", [np.zeros(h * w, np.float32), u], (-(-w // 8), -(-h // 8), 1),
              {"size": (w, h)}).reshape(h, w)
    want = u.copy()
    want[1:-1, 1:-1] = u[1:-1, :-2] + u[1:-1, 2:] + u[:-2, 1:-1] + u[2:, 1:-1] - 4 * u[1:-1, 1:-1]
    np.testing.assert_array_equal(got, want)


# 6. f16 arithmetic --------------------------------------------------------------------------------------------

HALF = Slang("""
[shader("compute")]
[numthreads(64, 1, 1)]
void axpy_half(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<half> y, uniform StructuredBuffer<half> x,
               uniform float a, uniform uint n)
{
    if (tid.x < n)
        y[tid.x] = half(a) * x[tid.x] + y[tid.x];
}
""")


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_f16_arithmetic(device):
    n = 1000  # an even count and an odd one below: 16-bit elements share 32-bit words
    x = (RNG.integers(-64, 64, n) / 8).astype(np.float16)
    y = (RNG.integers(-64, 64, n) / 4).astype(np.float16)
    if not has_f16(device):
        with pytest.raises((Unsupported, CompileError), match="16-bit floats|float16"):
            run(device, HALF, "axpy_half", [y, x], -(-n // 64), {"a": 0.5, "n": n})
        return
    got = run(device, HALF, "axpy_half", [y, x], -(-n // 64), {"a": 0.5, "n": n})
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.float16(0.5) * x + y)  # every product and sum is exact in f16
    got = run(device, HALF, "axpy_half", [y[:999], x[:999]], 16, {"a": 2.0, "n": 999})
    np.testing.assert_array_equal(got, np.float16(2.0) * x[:999] + y[:999])


# 7. atomics: a histogram --------------------------------------------------------------------------------------

HISTOGRAM = Slang("""
[shader("compute")]
[numthreads(64, 1, 1)]
void histogram(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<Atomic<uint>> bins,
               uniform StructuredBuffer<float> x, uniform float lo, uniform float width, uniform uint nbins,
               uniform uint n)
{
    if (tid.x >= n)
        return;
    int b = int(floor((x[tid.x] - lo) / width));
    bins[clamp(b, 0, int(nbins) - 1)].add(1u);
}
""")


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_atomic_histogram(device):
    n, nbins = 10000, 16
    x = RNG.normal(0.0, 1.0, n).astype(np.float32)
    got = run(device, HISTOGRAM, "histogram", [np.zeros(nbins, np.uint32), x], -(-n // 64),
              {"lo": -2.0, "width": 0.25, "nbins": nbins, "n": n})
    index = np.clip(np.floor((x - np.float32(-2.0)) / np.float32(0.25)).astype(np.int64), 0, nbins - 1)
    np.testing.assert_array_equal(got, np.bincount(index, minlength=nbins))
    assert got.sum() == n


# 8. a generic kernel specialized by a constant ----------------------------------------------------------------

ROW_SUM = Slang("""
[shader("compute")]
[numthreads(64, 1, 1)]
void row_sum<let N : int>(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> out,
                          uniform StructuredBuffer<float> x, uniform uint rows)
{
    if (tid.x >= rows)
        return;
    float acc = 0.0;
    [ForceUnroll]
    for (int j = 0; j < N; j++)
        acc += x[tid.x * N + j];
    out[tid.x] = acc;
}
""")


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_generic_specialized_by_a_constant(device):
    rows = 200
    for width in (1, 4, 7):
        x = RNG.integers(-100, 100, (rows, width)).astype(np.float32)
        got = run(device, ROW_SUM.specialized(width), "row_sum", [np.zeros(rows, np.float32), x], -(-rows // 64),
                  {"rows": rows})
        np.testing.assert_array_equal(got, x.sum(axis=1))


# 9. tiled matrix multiply through shared memory ---------------------------------------------------------------

MATMUL = Slang("""
static const uint TILE = 16;
groupshared float tileA[TILE][TILE];
groupshared float tileB[TILE][TILE];
struct Dims { uint m; uint n; uint k; };

[shader("compute")]
[numthreads(16, 16, 1)]
void matmul(uint3 tid: SV_DispatchThreadID, uint3 lid: SV_GroupThreadID, uniform RWStructuredBuffer<float> c,
            uniform StructuredBuffer<float> a, uniform StructuredBuffer<float> b, uniform Dims d)
{
    uint row = tid.y, col = tid.x;
    float acc = 0.0;
    for (uint t = 0; t < (d.k + TILE - 1) / TILE; t++) {
        uint ak = t * TILE + lid.x, bk = t * TILE + lid.y;
        tileA[lid.y][lid.x] = (row < d.m && ak < d.k) ? a[row * d.k + ak] : 0.0;
        tileB[lid.y][lid.x] = (bk < d.k && col < d.n) ? b[bk * d.n + col] : 0.0;
        GroupMemoryBarrierWithGroupSync();
        for (uint i = 0; i < TILE; i++)
            acc += tileA[lid.y][i] * tileB[i][lid.x];
        GroupMemoryBarrierWithGroupSync();
    }
    if (row < d.m && col < d.n)
        c[row * d.n + col] = acc;
}
""")


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_tiled_matmul(device):
    m, n, k = 37, 53, 70  # no dimension a multiple of the tile
    a = RNG.integers(-8, 8, (m, k)).astype(np.float32)
    b = RNG.integers(-8, 8, (k, n)).astype(np.float32)
    got = run(device, MATMUL, "matmul", [np.zeros(m * n, np.float32), a, b], (-(-n // 16), -(-m // 16), 1),
              {"d": {"m": m, "n": n, "k": k}}).reshape(m, n)
    np.testing.assert_array_equal(got, a @ b)  # small integers: exact in any summation order


# 10. prefix sum -----------------------------------------------------------------------------------------------

SCAN = Slang("""
groupshared uint tmp[256];

// An inclusive scan of each 256-element block in place; each block's total into sums.
[shader("compute")]
[numthreads(256, 1, 1)]
void scan_blocks(uint3 tid: SV_DispatchThreadID, uint3 lid: SV_GroupThreadID, uint3 gid: SV_GroupID,
                 uniform RWStructuredBuffer<uint> data, uniform RWStructuredBuffer<uint> sums, uniform uint n)
{
    tmp[lid.x] = tid.x < n ? data[tid.x] : 0;
    GroupMemoryBarrierWithGroupSync();
    for (uint offset = 1; offset < 256; offset <<= 1) {
        uint add = lid.x >= offset ? tmp[lid.x - offset] : 0;
        GroupMemoryBarrierWithGroupSync();
        tmp[lid.x] += add;
        GroupMemoryBarrierWithGroupSync();
    }
    if (tid.x < n)
        data[tid.x] = tmp[lid.x];
    if (lid.x == 255)
        sums[gid.x] = tmp[255];
}

// Each block after the first gets the scanned total of the blocks before it.
[shader("compute")]
[numthreads(256, 1, 1)]
void add_offsets(uint3 tid: SV_DispatchThreadID, uint3 gid: SV_GroupID, uniform RWStructuredBuffer<uint> data,
                 uniform StructuredBuffer<uint> sums, uniform uint n)
{
    if (gid.x > 0 && tid.x < n)
        data[tid.x] += sums[gid.x - 1];
}
""")


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_prefix_sum(device):
    n = 50000  # 196 blocks: their totals are scanned by one block, then added back
    groups = -(-n // 256)
    x = RNG.integers(0, 1000, n).astype(np.uint32)
    scan = device.pipeline(SCAN, "scan_blocks", buffers=2)
    add = device.pipeline(SCAN, "add_offsets", buffers=2)
    data, sums, spare = device.upload(x), device.alloc(groups, "uint32"), device.alloc(1, "uint32")
    try:
        device.dispatch(scan, [data, sums], groups, {"n": n})
        device.dispatch(scan, [sums, spare], 1, {"n": groups})
        device.dispatch(add, [data, sums], groups, {"n": n})
        got = device.download(data)
    finally:
        for b in (data, sums, spare):
            b.close()
    np.testing.assert_array_equal(got, np.cumsum(x, dtype=np.uint32))


# -- every barrier form (OpenGL gets them as core GLSL) ----------------------------------------------------------

BARRIERS = Slang("""
groupshared uint shared[64];

[shader("compute")]
[numthreads(64, 1, 1)]
void reverse(uint3 tid: SV_DispatchThreadID, uint3 lid: SV_GroupThreadID, uniform RWStructuredBuffer<uint> y)
{
    shared[lid.x] = y[tid.x];
    GroupMemoryBarrier();
    DeviceMemoryBarrier();
    AllMemoryBarrier();
    GroupMemoryBarrierWithGroupSync();
    uint mine = shared[63 - lid.x];
    DeviceMemoryBarrierWithGroupSync();
    y[tid.x] = mine;
    AllMemoryBarrierWithGroupSync();
}
""")


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_every_barrier_form(device):
    x = np.arange(256, dtype=np.uint32) * 3
    got = run(device, BARRIERS, "reverse", [x], 4)
    np.testing.assert_array_equal(got, x.reshape(4, 64)[:, ::-1].ravel())
    if device.backend == "opengl":
        code = str(BARRIERS.compile("opengl", "reverse").code)
        assert "GL_KHR_memory_scope_semantics" not in code and code.count("barrier();") == 3


# -- the compiler alone: what each kernel needs, and CUDA's code through NVRTC ------------------------------------

KERNELS = [(SAXPY, "saxpy"), (REDUCE, "reduce_sum"), (WAVE, "wave_sum"), (AFFINE, "transform"), (LAPLACE, "laplace"),
           (HALF, "axpy_half"), (HISTOGRAM, "histogram"), (ROW_SUM.specialized(4), "row_sum"), (MATMUL, "matmul"),
           (SCAN, "scan_blocks"), (SCAN, "add_offsets")]


@pytest.mark.parametrize("target", ["vulkan", "webgpu", "opengl", "cuda"])
def test_each_kernel_needs_what_it_uses(slangc, target):
    for source, entry in KERNELS:
        needs = source.compile(target, entry).needs
        assert ("float16" in needs) == (source is HALF), (entry, needs)
        assert ("subgroups" in needs) == (source is WAVE and target != "cuda"), (entry, needs)
    if target == "vulkan":
        assert {"subgroups:arithmetic"} <= WAVE.compile(target, "wave_sum").needs
    if target == "opengl":  # the workgroup barriers are core GLSL: no extension an OpenGL driver may lack
        for source, entry in (REDUCE, "reduce_sum"), (MATMUL, "matmul"), (SCAN, "scan_blocks"):
            code = str(source.compile(target, entry).code)
            assert "barrier();" in code and "GL_KHR_memory_scope_semantics" not in code and "controlBarrier" not in code


class _Device:
    """What the translation reads of a CUDA device (its backend, arch, capabilities), for NVRTC without a GPU."""

    backend = "cuda"
    arch = "sm_90"

    def __init__(self, caps: CapabilityFlags):
        self.descriptor = type("Descriptor", (), {"capabilities": caps, "extras": {}, "name": "sm_90"})()


def test_every_kernel_compiles_for_cuda_with_nvrtc(slangc):
    pytest.importorskip("ironaccel_cuda")
    from ironaccel_cuda.program import Program

    device = _Device(CapabilityFlags.FP16 | CapabilityFlags.SUBGROUPS)
    for source, entry in KERNELS:
        try:
            translation = source.__ironaccel_translate__(device, entry, {})
        except NotAvailable as exc:
            if required_backends():
                raise
            pytest.skip(f"no NVRTC or CUDA headers here: {exc}")
        if source is HALF:  # half: a CUBIN made with the CUDA headers (cuda_fp16.h) on NVRTC's include path
            assert cuda_include() is not None
            assert translation.code[:4] == b"\x7fELF" and translation.key[1:] == ("cubin", "sm_90")
        else:
            Program(translation.code, name_expressions=[translation.entry]).compile("ptx", arch="sm_90")
    with pytest.raises(Unsupported, match="16-bit floats"):
        HALF.__ironaccel_translate__(_Device(CapabilityFlags.SUBGROUPS), "axpy_half", {})


def test_specialized_takes_type_names_and_ints_only():
    assert ROW_SUM.specialized(8).options[-2:] == ("-specialize", "8")
    for bad in (True, 1.5, "4; evil", None):
        with pytest.raises(InvalidArgument):
            ROW_SUM.specialized(bad)
