"""ironaccel_cuda_compat.cuda_core without a GPU: install(), the coverage map, options, and the test runner.

The device-side checks are in tests/gpu/test_compat_cuda_core.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ironaccel import Unsupported

HERE = Path(__file__).parent
RUNNER = HERE.parent / "tools" / "run_cuda_core_tests.py"

# cuda.core 1.2's public names (its __all__, graph.__all__, utils.__all__).
CUDA_CORE_NAMES = (
    "Buffer Context ContextOptions Device DeviceMemoryResource DeviceMemoryResourceOptions DeviceResources Event "
    "EventOptions GraphMemoryResource GraphicsResource Host Kernel LEGACY_DEFAULT_STREAM LaunchConfig "
    "LegacyPinnedMemoryResource Linker LinkerOptions ManagedBuffer ManagedMemoryResource ManagedMemoryResourceOptions "
    "MemoryResource ObjectCode PER_THREAD_DEFAULT_STREAM PinnedMemoryResource PinnedMemoryResourceOptions Program "
    "ProgramOptions SMResource SMResourceOptions Stream StreamOptions TensorMapDescriptor TensorMapDescriptorOptions "
    "VirtualMemoryResource VirtualMemoryResourceOptions WorkqueueResource WorkqueueResourceOptions launch"
).split()
GRAPH_NAMES = (
    "AllocNode ChildGraphNode ConditionalNode EmptyNode EventRecordNode EventWaitNode ExecutableChildGraphNode "
    "ExecutableEventRecordNode ExecutableEventWaitNode ExecutableGraphNode ExecutableHostCallbackNode "
    "ExecutableKernelNode ExecutableMemcpyNode ExecutableMemsetNode FreeNode Graph GraphBuilder GraphCompleteOptions "
    "GraphCondition GraphDebugPrintOptions GraphDefinition GraphNode HostCallbackNode IfElseNode IfNode KernelNode "
    "MemcpyNode MemsetNode SwitchNode WhileNode"
).split()
UTILS_NAMES = (
    "CopyOptions FileStreamProgramCache InMemoryProgramCache MemcpyOverlapMode MemcpySrcAccessOrder "
    "ProgramCacheResource StridedMemoryView args_viewable_as_strided_memory copy_batch discard_batch "
    "discard_prefetch_batch make_program_cache_key prefetch_batch"
).split()


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_install_makes_cuda_core_the_compat_everywhere():
    out = _python("""
        from ironaccel_cuda_compat import cuda_core
        cuda_core.install()
        cuda_core.install()  # again: nothing happens
        import cuda.core
        from cuda.core import Device, launch
        from cuda.core.graph import GraphBuilder
        from cuda.core.utils import StridedMemoryView
        from cuda.core._utils.cuda_utils import CUDAError, handle_return
        import cuda.core._memory._legacy as legacy
        import cuda.core._module
        assert cuda.core is cuda_core and Device is cuda_core.Device and launch is cuda_core.launch
        assert GraphBuilder is cuda_core.graph.GraphBuilder and StridedMemoryView is cuda_core.utils.StridedMemoryView
        assert legacy is cuda_core._memory._legacy and cuda_core.installed()
        import sys
        aliased = [m for n, m in sys.modules.items() if n == "cuda.core" or n.startswith("cuda.core.")]
        assert all(m.__name__.startswith("ironaccel_cuda_compat.cuda_core") for m in aliased)
        # each keeps its own spec: a relative import inside a function must not warn __package__ != __spec__.parent
        assert all(m.__spec__.parent == m.__package__ for m in aliased), [
            (m.__name__, m.__spec__.parent, m.__package__) for m in aliased if m.__spec__.parent != m.__package__]
        import importlib, warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            exec("from ._device import Device as D", vars(sys.modules["cuda.core._module"]))
        importlib.reload(sys.modules["cuda.core._utils.cuda_utils"])  # reload still finds the module
        try:
            import cuda.core._no_such_module
        except ModuleNotFoundError:
            print("ok")
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_install_refuses_after_the_real_cuda_core():
    pytest.importorskip("cuda.core")
    out = _python("""
        import cuda.core
        from ironaccel_cuda_compat import cuda_core
        try:
            cuda_core.install()
        except RuntimeError as exc:
            print("refused:", exc)
    """)
    assert out.returncode == 0, out.stderr
    assert "refused: cuda.core is already imported" in out.stdout


def test_the_compat_never_imports_cuda_core():
    out = _python("""
        import sys
        from ironaccel_cuda_compat import cuda_core
        import ironaccel_cuda_compat.cuda_core.graph, ironaccel_cuda_compat.cuda_core.utils
        print(sorted(n for n in sys.modules if n == "cuda.core" or n.startswith("cuda.core.")))
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_every_public_name_of_cuda_core_is_there():
    from ironaccel_cuda_compat import cuda_core as cc

    assert sorted(cc.__all__) == sorted(CUDA_CORE_NAMES)
    assert sorted(cc.graph.__all__) == sorted(GRAPH_NAMES)
    assert sorted(cc.utils.__all__) == sorted(UTILS_NAMES)
    for name in CUDA_CORE_NAMES:
        assert hasattr(cc, name), name
    for name in GRAPH_NAMES:
        assert hasattr(cc.graph, name), name
    for name in UTILS_NAMES:
        assert hasattr(cc.utils, name), name
    assert not hasattr(cc, "StridedMemoryView") and not hasattr(cc, "args_viewable_as_strided_memory")


def test_the_coverage_map_is_true():
    from ironaccel_cuda_compat import cuda_core as cc
    from ironaccel_cuda_compat.cuda_core import _coverage

    covered = set()
    for names, status, note in _coverage.ENTRIES:
        assert status in (_coverage.SAME, _coverage.DIFFERS, _coverage.MISSING), names
        assert note, names
        for full in (names,) if isinstance(names, str) else names:
            covered.add(full)
            obj = cc
            for part in full.split("."):
                obj = getattr(obj, part, None)
                assert obj is not None, f"{full} (in the coverage map) is not in the compat"
            if status == _coverage.MISSING and isinstance(obj, type) and issubclass(obj, cc._missing.MissingFeature):
                with pytest.raises(Unsupported, match="needs"):
                    obj()
            if status == _coverage.MISSING and getattr(obj, "__name__", "") == full.rsplit(".", 1)[-1] and callable(
                    obj) and not isinstance(obj, type):
                with pytest.raises(Unsupported, match="needs"):
                    obj()
    for name in CUDA_CORE_NAMES:
        assert name in covered, f"{name} has no entry in the coverage map"
    for name in GRAPH_NAMES:
        assert f"graph.{name}" in covered, f"graph.{name} has no entry in the coverage map"
    for name in UTILS_NAMES:
        assert f"utils.{name}" in covered, f"utils.{name} has no entry in the coverage map"
    assert _coverage.render() in cc.__doc__


def test_the_compat_guide_carries_the_coverage_map():
    from ironaccel_cuda_compat.cuda_core import _coverage

    guide = (HERE.parent.parent / "docs" / "guides" / "compat.md").read_text()
    assert _coverage.render() in guide, "docs/guides/compat.md's coverage map differs from _coverage.render(): paste it"


def test_missing_functions_and_methods_raise_unsupported():
    from ironaccel_cuda_compat import cuda_core as cc

    for fn in (cc.checkpoint.Process, cc.system.get_nvml_version):
        with pytest.raises(Unsupported, match="needs"):
            fn()
    with pytest.raises(Unsupported, match="yet: it needs"):
        _ = cc.GraphicsResource.from_anything  # class attributes of a missing class say so too
    assert isinstance(Unsupported("cuda", "x", "y"), NotImplementedError)


def test_program_options_are_written_as_nvrtc_and_nvvm_take_them():
    from ironaccel_cuda_compat import cuda_core as cc
    from ironaccel_cuda_compat.cuda_core._utils.cuda_utils import CUDAError

    o = cc.ProgramOptions(arch="sm_80", debug=True, lineinfo=True, ftz=True, define_macro=[("A", "1"), "B"],
                          include_path=["/x", "/y"], std="c++17", diag_suppress=(1, 2), relocatable_device_code=False,
                          ptxas_options=["-v"], max_register_count=32, name=None)
    assert o.name == "default_program"
    assert o.as_bytes("nvrtc") == [s.encode() for s in (
        "-arch=sm_80", "--relocatable-device-code=false", "--device-debug", "--generate-line-info",
        "--ptxas-options=-v", "--maxrregcount=32", "--ftz=true", "--define-macro=A=1", "--define-macro=B",
        "--include-path=/x", "--include-path=/y", "--std=c++17", "--diag-suppress=1", "--diag-suppress=2")]
    nvvm = cc.ProgramOptions(arch="sm_90", debug=True, ftz=False, device_code_optimize=True)
    assert nvvm.as_bytes("nvvm", "ltoir") == [b"-arch=compute_90", b"-g", b"-opt=3", b"-ftz=0", b"-gen-lto"]
    with pytest.raises(CUDAError, match="not supported by NVVM backend: lineinfo, std"):
        cc.ProgramOptions(arch="sm_90", lineinfo=True, std="c++17").as_bytes("nvvm")
    with pytest.raises(ValueError, match="Unknown backend 'x'"):
        o.as_bytes("x")
    with pytest.raises(RuntimeError, match="Expected define_macro tuple"):
        cc.ProgramOptions(arch="sm_90", define_macro=("A",)).as_bytes("nvrtc")
    with pytest.raises(TypeError, match="Each extra module must be a 2-tuple"):
        cc.ProgramOptions(arch="sm_90", extra_sources=["x"])
    with pytest.raises(RuntimeError, match=r"^Unsupported code_type='fortran'"):
        cc.Program("x", "FORTRAN", cc.ProgramOptions(arch="sm_90"))
    with pytest.raises(ValueError, match="not supported by the NVRTC backend"):
        cc.Program("x", "c++", cc.ProgramOptions(arch="sm_90", extra_sources=[("m", "ir")]))
    assert str(cc.Program("x", "c++", {"arch": "sm_90"}).backend) == "NVRTC"


def test_launch_config_checks_and_native_form():
    from cuda.bindings import driver

    from ironaccel_cuda_compat import cuda_core as cc
    from ironaccel_cuda_compat.cuda_core._launch_config import _to_native_launch_config

    c = cc.LaunchConfig(grid=(2, 3), block=32, shmem_size=128)
    assert (c.grid, c.block, c.shmem_size, c.cluster) == ((2, 3, 1), (32, 1, 1), 128, None)
    assert (c._grid, c._block, c._plain) == ((2, 3, 1), 32, True)
    for bad in (dict(grid=0, block=1), dict(grid=(1, 0), block=1), dict(grid=1, block=(1, 2, 3, 4)),
                dict(grid=1.5, block=1)):
        with pytest.raises(ValueError):
            cc.LaunchConfig(**bad)
    c.cluster = (2, 1, 1)  # a public attribute, as in cuda.core
    assert not c._plain
    native = _to_native_launch_config(c)
    assert (native.gridDimX, native.gridDimY, native.blockDimX, native.sharedMemBytes) == (4, 3, 32, 128)
    assert native.numAttrs == 1
    assert native.attrs[0].id == driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    assert c != cc.LaunchConfig(grid=(2, 3), block=32, shmem_size=128)
    c.cluster = None
    assert c == cc.LaunchConfig(grid=(2, 3), block=32, shmem_size=128) and c._plain


def test_strided_memory_view_of_numpy_arrays():
    import numpy as np

    from ironaccel_cuda_compat import cuda_core as cc

    a = np.zeros((64, 4), dtype=np.float32, order="F")
    v = cc.utils.StridedMemoryView.from_any_interface(a, stream_ptr=-1)
    assert v.shape == (64, 4) and v.strides == (1, 64) and v.dtype == np.float32 and not v.is_device_accessible
    assert v.ptr == a.ctypes.data and v.exporting_obj is a
    back = np.from_dlpack(v)
    assert back.shape == (64, 4) and back.ctypes.data == a.ctypes.data
    with pytest.raises(BufferError, match="copy=True"):
        v.__dlpack__(copy=True)
    with pytest.raises(ValueError, match="contiguous"):
        v.view(dtype=np.uint8)  # the last dimension of a Fortran-order array is strided
    w = cc.utils.StridedMemoryView.from_any_interface(np.zeros((8, 4), np.float32), stream_ptr=-1).view(
        dtype=np.uint8)
    assert w.shape == (8, 16) and w.dtype == np.uint8


def test_program_caches_store_and_evict():
    from ironaccel_cuda_compat import cuda_core as cc

    mem = cc.utils.InMemoryProgramCache(max_size_bytes=10)
    mem[b"a"] = b"12345"
    mem["b"] = b"67890"
    mem[b"c"] = b"x"
    assert b"a" not in mem and mem.get("b") == b"67890" and len(mem) == 2
    with pytest.raises(TypeError):
        mem[1] = b"x"


def test_file_stream_program_cache(tmp_path):
    from ironaccel_cuda_compat import cuda_core as cc

    cache = cc.utils.FileStreamProgramCache(tmp_path / "c", max_size_bytes=8)
    cache[b"k1"] = b"abcd"
    cache[b"k2"] = b"efgh"
    assert cache[b"k1"] == b"abcd" and len(cache) == 2
    cache[b"k3"] = b"ijkl"
    assert len(cache) == 2
    again = cc.utils.FileStreamProgramCache(tmp_path / "c")
    assert again.get(b"k3") == b"ijkl"
    with pytest.raises(KeyError):
        del cache[b"nothing"]
    key = cc.utils.make_program_cache_key(code="x", code_type="c++", options=cc.ProgramOptions(arch="sm_90"),
                                          target_type="cubin")
    assert key != cc.utils.make_program_cache_key(code="y", code_type="c++",
                                                  options=cc.ProgramOptions(arch="sm_90"), target_type="cubin")
    with pytest.raises(ValueError, match="extra_digest"):
        cc.utils.make_program_cache_key(code="x", code_type="c++", target_type="cubin",
                                        options=cc.ProgramOptions(arch="sm_90", include_path="/i"))


def test_program_cache_key_rules_per_backend(monkeypatch):
    """The key follows the backend: NVRTC's file-reading rules, the linker's fields, name expressions unordered."""
    from ironaccel_cuda_compat import cuda_core as cc
    from ironaccel_cuda_compat.cuda_core import _linker
    from ironaccel_cuda_compat.cuda_core.utils._program_cache import _keys

    key = cc.utils.make_program_cache_key
    opts = cc.ProgramOptions(arch="sm_90")
    with pytest.raises(ValueError, match="directory component"):
        key(code="x", code_type="c++", options=cc.ProgramOptions(arch="sm_90", name="k/a.cu"), target_type="cubin")
    assert key(code="x", code_type="c++", options=cc.ProgramOptions(arch="sm_90", name="k/a.cu"),
               target_type="cubin", extra_digest=b"h")
    assert (key(code="x", code_type="c++", options=opts, target_type="cubin", name_expressions=("f", "g"))
            == key(code="x", code_type="c++", options=opts, target_type="cubin", name_expressions=("g", "f")))
    assert (key(code="x", code_type="c++", options=opts, target_type="cubin", name_expressions=("f",))
            != key(code="x", code_type="c++", options=opts, target_type="cubin", name_expressions=(b"f",)))
    with pytest.raises(TypeError, match="str or bytes"):
        key(code="x", code_type="c++", options=opts, target_type="cubin", name_expressions=(1,))
    with pytest.raises(TypeError, match="code_type='nvvm'"):
        key(code=b"x", code_type="c++", options=opts, target_type="cubin")
    # PTX goes through the linker: NVRTC-only options and name expressions do not move its key ...
    ptx = key(code="x", code_type="ptx", options=opts, target_type="cubin")
    assert ptx == key(code="x", code_type="ptx", options=cc.ProgramOptions(arch="sm_90", define_macro="A"),
                      target_type="cubin", name_expressions=("f",))
    assert ptx != key(code="x", code_type="ptx", options=cc.ProgramOptions(arch="sm_90", debug=True),
                      target_type="cubin")
    # ... a different linker version does, and under cuLink the options it rejects are refused
    monkeypatch.setattr(_keys, "_linker_backend_and_version", lambda use_driver: ("nvJitLink", "99"))
    assert ptx != key(code="x", code_type="ptx", options=opts, target_type="cubin")
    monkeypatch.setattr(_linker, "_decide_nvjitlink_or_driver", lambda: True)
    with pytest.raises(ValueError, match="cuLink"):
        key(code="x", code_type="ptx", options=cc.ProgramOptions(arch="sm_90", split_compile=0), target_type="cubin")
    with pytest.raises(ValueError, match="use_libdevice"):
        key(code=b"x", code_type="nvvm", options=cc.ProgramOptions(arch="sm_90", use_libdevice=True),
            target_type="ptx")
    with pytest.raises(ValueError, match="name_expressions"):
        cc.Program("x", "c++", opts).compile("cubin", name_expressions=("f",), cache=cc.utils.InMemoryProgramCache())


def test_file_cache_spares_an_entry_replaced_during_clear(tmp_path):
    from ironaccel_cuda_compat import cuda_core as cc

    cache = cc.utils.FileStreamProgramCache(tmp_path / "c")
    cache[b"a"] = b"old"
    cache[b"b"] = b"old"
    path = cache._path_for_key(b"a")

    class Racing(cc.utils.FileStreamProgramCache):
        def _iter_entry_paths(self):  # another writer replaces entry a after the scan
            yield from super()._iter_entry_paths()
            fresh = path.parent / "inflight"
            fresh.write_bytes(b"new entry from another process")
            os.replace(fresh, path)

    Racing(tmp_path / "c").clear()
    assert path.read_bytes() == b"new entry from another process" and len(cache) == 1
    with pytest.raises(ValueError, match="positive"):
        cc.utils.InMemoryProgramCache(max_size_bytes=0)


def test_strided_memory_view_from_dlpack_rules():
    """cuda.core's: a CPU or CUDA source with stream_ptr=None is ambiguous; an unknown device is refused unasked."""
    import numpy as np

    from ironaccel_cuda_compat import cuda_core as cc

    with pytest.raises(BufferError, match="ambiguous"):
        cc.utils.StridedMemoryView.from_dlpack(np.zeros(4), stream_ptr=None)

    class Vulkan:
        def __dlpack_device__(self):
            return (7, 0)

        def __dlpack__(self, **kwargs):
            raise AssertionError("asked")

    with pytest.raises(BufferError, match="device not supported"):
        cc.utils.StridedMemoryView.from_dlpack(Vulkan(), stream_ptr=0)
    assert cc.utils.StridedMemoryView.from_dlpack(np.arange(3.0), stream_ptr=-1).shape == (3,)


def _fake_suite(folder: Path) -> Path:
    tests = folder / "cuda_core" / "tests"
    tests.mkdir(parents=True)
    (folder / "cuda_python_test_helpers").mkdir()
    (tests / "conftest.py").write_text("import cuda.core\n")
    (tests / "test_device.py").write_text(textwrap.dedent("""
        import pytest
        import cuda.core

        def test_is_the_compat():
            assert cuda.core.Device.__module__.startswith("ironaccel_cuda_compat.cuda_core")

        def test_fails():
            assert False, "on purpose"

        def test_skips():
            pytest.skip("no reason")

        @pytest.mark.xfail(reason="known")
        def test_xfails():
            assert False

        @pytest.mark.parametrize("i", range(6))
        def test_many(i):
            pass
    """))
    (tests / "test_stream.py").write_text("import cuda.core._not_in_the_compat\n\ndef test_x():\n    pass\n")
    return tests


def test_runner_counts_skips_as_failures(tmp_path):
    tests = _fake_suite(tmp_path)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(RUNNER), str(tests), "test_device.py", "test_stream.py", "--out",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # 7 of 10 collected: below the 90% target
    summary = json.loads((out / "summary.json").read_text())
    device = summary["per_file"]["test_device.py"]
    assert (device["cases"], device["passed"], device["failed"], device["skipped"], device["xfailed"]) == (
        10, 7, 1, 1, 1)
    assert "test_stream.py" in summary["per_file"]
    results = json.loads((out / "results.json").read_text())
    skipped = [c for c in results["cases"] if c["outcome"] == "skipped"]
    assert len(skipped) == 1 and "no reason" in skipped[0]["reason"]
    assert "test_stream.py" in results["collection_errors"]
    assert (out / "junit.xml").is_file() and "| test_device.py | 10 | 7 |" in (out / "table.md").read_text()
    assert "cuda.core was ironaccel_cuda_compat.cuda_core in this run" in (out / "pytest.log").read_text()


def test_the_examples_runner_gives_each_example_its_verdict(tmp_path):
    """tools/run_cuda_core_examples.py runs an example with cuda.core and through the compat: PASS, "as cuda.core"
    when both fail, FAIL when only the compat's run fails, "out of scope" without running it; exit 1 on a FAIL."""
    import json
    import subprocess
    import sys

    (tmp_path / "fine.py").write_text("print('ok')\n")
    (tmp_path / "compat_breaks.py").write_text(
        "import sys\nsys.exit(3 if 'ironaccel_cuda_compat.cuda_core' in sys.modules else 0)\n")
    (tmp_path / "needs_a_gpu_lib.py").write_text("raise SystemExit('no such library here')\n")
    (tmp_path / "gl_interop_demo.py").write_text("raise SystemExit('must not run')\n")
    out = tmp_path / "rows.json"
    runner = HERE.parent / "tools" / "run_cuda_core_examples.py"
    proc = subprocess.run([sys.executable, str(runner), str(tmp_path), "--json", str(out), "--timeout", "60"],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    verdicts = {r["example"]: r["verdict"] for r in json.loads(out.read_text())}
    assert verdicts == {"fine": "PASS", "compat_breaks": "FAIL", "needs_a_gpu_lib": "as cuda.core",
                        "gl_interop_demo": "out of scope"}
    assert "1 PASS, 1 as cuda.core, 1 out of scope, 1 FAIL" in proc.stdout


def test_a_view_hands_a_cuda_producer_its_stream_as_an_int():
    """StridedMemoryView(arr, stream.handle): the producer's __dlpack__ gets an int (CuPy refuses a CUstream),
    as cuda.core passes it; cuda.core's strided_memory_view examples failed here before."""
    import numpy as np

    from ironaccel_cuda_compat import cuda_core as cc

    class Handle:  # what Stream.handle is: a CUstream-like object that converts with int()
        def __int__(self) -> int:
            return 7

    class Producer:  # a CUDA-resident array as the protocol sees it; the capsule is numpy's
        def __init__(self) -> None:
            self.data, self.streams = np.arange(4, dtype=np.int32), []

        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, *, stream=None, max_version=None):
            if stream is not None and type(stream) is not int:
                raise ValueError(f"On CUDA, the valid stream for the DLPack protocol is -1, 1, 2, ..., got {stream!r}")
            self.streams.append(stream)
            return self.data.__dlpack__()

    p = Producer()
    view = cc.utils.StridedMemoryView.from_dlpack(p, Handle())
    assert p.streams == [7] and view.shape == (4,)
    cc.utils.StridedMemoryView.from_dlpack(p, -1)
    assert p.streams == [7, -1]


@pytest.mark.parametrize("code_type", ["c++", "ptx"])
def test_program_source_bytes_refused_as_cuda_core_refuses_them(code_type):
    # cuda.core 1.2 (Program_init: assert_type(code, str)) takes C++ and PTX source only as str; NVVM IR may be
    # bytes.  The compat answers bytes the same way, word for word, rather than accepting what cuda.core refuses.
    from ironaccel_cuda_compat import cuda_core as cc

    source = b'extern "C" __global__ void k() {}'
    with pytest.raises(TypeError) as info:
        cc.Program(source, code_type, cc.ProgramOptions(arch="sm_90"))
    assert str(info.value) == "Expected type str, but got bytes"
    with pytest.raises(TypeError, match="but got bytearray"):
        cc.Program(bytearray(source), code_type, cc.ProgramOptions(arch="sm_90"))
    real = textwrap.dedent(f"""
        try:
            from cuda.core import Program, ProgramOptions
        except ImportError:
            print("absent")
            raise SystemExit
        try:
            Program({source!r}, {code_type!r}, ProgramOptions(arch="sm_90"))
        except TypeError as exc:
            print("TypeError:", exc)
    """)
    out = subprocess.run([sys.executable, "-c", real], capture_output=True, text=True, timeout=120)
    if out.stdout.strip() != "absent":  # cuda.core itself is installed (CI installs it): the same refusal
        assert out.stdout.strip() == "TypeError: Expected type str, but got bytes", out.stdout + out.stderr
    assert str(cc.Program(source, "nvvm", cc.ProgramOptions(arch="sm_90")).backend) == "NVVM"
