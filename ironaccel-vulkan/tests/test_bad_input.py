"""Bad input to the Vulkan execution model that the conformance kit does not try.

Each case gets a typed ironaccel error naming the operation, leaves nothing behind (the device's live
allocations, semaphores, query pools, pipelines and this process's open fds are what they were) and leaves
the device usable.  Every test runs on a plain device and one with the validation layer on (skipped where
the layer is not installed), where any validation error fails it (see conftest).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ironaccel.compute.execution import ExternalFence, ExternalMemory
from ironaccel.errors import ClosedError, CompileError, InvalidArgument, InvalidState, IronAccelError, Unsupported
from ironaccel.testing.pytest_plugin import require
from ironaccel_vulkan import Backend, validation
from ironaccel_vulkan.physical import TYPE_CPU

KERNELS = Path(__file__).resolve().parent / "kernels"
TYPED = (KERNELS / "typed_params.spv").read_bytes()
CONSTANTS = (KERNELS / "constants.spv").read_bytes()
NESTED = (KERNELS / "nested_params.spv").read_bytes()
F32 = np.float32
N = 256


def _open(validated: bool) -> Any:
    require("vulkan")
    backend = Backend(validation=validated)
    if validated and not backend.probe().available:
        pytest.skip(backend.probe().reason)
    return backend.open(0)


@pytest.fixture(params=["plain", "validated"])
def device(request: pytest.FixtureRequest) -> Iterator[Any]:
    dev = _open(request.param == "validated")
    yield dev
    dev.close()


@pytest.fixture
def other() -> Iterator[Any]:
    dev = _open(False)
    yield dev
    dev.close()


@pytest.fixture
def so(device: Any, scale_offset_spv: bytes) -> Any:
    return device.pipeline(scale_offset_spv, buffers=2, params=3, workgroup_size=(64, 1, 1))


def live(device: Any) -> tuple[int, ...]:
    """What a refused call must not leave behind (the fds an import takes: `holders`)."""
    state = device._state
    return len(state.allocations), len(state.semaphores), len(state.query_pools), len(state.pipelines)


#: What a batch's checks name: the kit checks a recorded dispatch as it checks `device.dispatch`.
DISPATCH = ("batch.dispatch", "Command.update", "dispatch")


def refused(error: type[IronAccelError], op: str | tuple[str, ...], call: Any, *args: Any, **kwargs: Any) -> str:
    """Call, expect `error` naming `op` (or one of them); return its message."""
    with pytest.raises(error) as info:
        call(*args, **kwargs)
    message = str(info.value)
    ops = (op,) if isinstance(op, str) else op
    assert any(message.startswith((f"vulkan: {name}:", f"vulkan: {name} (")) for name in ops), message
    return message


def within(seconds: float, call: Any, *args: Any) -> Any:
    """`call(*args)` on a daemon thread: fails the test instead of hanging it if the call blocks."""
    found: list[Any] = []

    def run() -> None:
        try:
            found.append(call(*args))
        except BaseException as exc:  # handed to the caller
            found.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert found, f"{call.__name__} still blocks after {seconds} s"
    if isinstance(found[0], BaseException):
        raise found[0]
    return found[0]


def usable(device: Any, so: Any) -> None:
    """The device still runs a dispatch and reads it back."""
    x, y = device.upload(np.arange(N, dtype=F32)), device.alloc(N, "float32")
    device.dispatch(so, [x, y], N // 64, (F32(2), F32(1), np.uint32(N))).wait(timeout=60)
    np.testing.assert_array_equal(device.download(y), np.arange(N, dtype=F32) * 2 + 1)


# -- fences and batches of another device ----------------------------------------------------------------

def test_fence_of_another_device(device: Any, other: Any, so: Any) -> None:
    if "fences" not in device.features:
        refused(Unsupported, "create_fence", device.create_fence)
        return
    batch = device.batch()
    x, y = device.upload(np.ones(N, F32)), device.alloc(N, "float32")
    batch.dispatch(so, [x, y], N // 64, (F32(1), F32(1), np.uint32(N)))
    foreign = other.create_fence()
    other.queue.signal(foreign, 1)
    before = live(device)
    refused(InvalidArgument, "submit", device.submit, batch, wait=[(foreign, 1)])
    refused(InvalidArgument, "submit", device.queue.submit, batch, signal=[(foreign, 2)])
    if "export_fence" in device.features:
        refused(InvalidArgument, "export_fence", device.export_fence, foreign)
    assert live(device) == before
    mine = device.create_fence()
    device.submit(batch, signal=[(mine, 1)])
    mine.wait(1, timeout=60)  # the batch and the fences are usable afterwards
    np.testing.assert_array_equal(device.download(y), np.full(N, 2, F32))
    foreign.wait(1, timeout=60)
    usable(device, so)


def test_fence_of_a_closed_device(so: Any, device: Any) -> None:
    if "fences" not in device.features:
        return
    gone = _open(False)
    fence = gone.create_fence()
    gone.close()
    refused(ClosedError, "Fence.wait", fence.wait, 0)
    batch = device.batch()
    batch.fill(device.alloc(N, "float32"), F32(0))
    refused(InvalidArgument, "submit", device.submit, batch, signal=[(fence, 1)])
    usable(device, so)


def test_batch_and_commands_of_another_device(device: Any, other: Any, so: Any, scale_offset_spv: bytes) -> None:
    x, y = device.upload(np.arange(N, dtype=F32)), device.alloc(N, "float32")
    out = np.zeros(N, F32)
    batch = device.batch()
    run = batch.dispatch(so, [x, y], N // 64, (F32(2), F32(0), np.uint32(N)))
    batch.read(y, out)
    theirs = other.pipeline(scale_offset_spv, buffers=2, params=3)
    their_buffer = other.alloc(N, "float32")
    before = live(device)
    refused(InvalidArgument, "submit", other.queue.submit, batch)
    refused(InvalidArgument, DISPATCH, batch.dispatch, theirs, [x, y], 1, (F32(1), F32(0), np.uint32(N)))
    refused(InvalidArgument, DISPATCH, batch.dispatch, so, [x, their_buffer], 1,
            (F32(1), F32(0), np.uint32(N)))
    refused(InvalidArgument, DISPATCH, run.update, buffers=[x, their_buffer])
    refused(InvalidArgument, "batch.read", batch.read, their_buffer, out)
    refused(InvalidArgument, "batch.write", batch.write, their_buffer, out)
    refused(InvalidArgument, "batch.fill", batch.fill, their_buffer, F32(0))
    assert len(batch) == 2 and live(device) == before  # nothing was added or made
    device.submit(batch).wait(timeout=60)  # the command kept its own buffers
    np.testing.assert_array_equal(out, np.arange(N, dtype=F32) * 2)
    usable(device, so)


# -- typed params and constants --------------------------------------------------------------------------

@dataclasses.dataclass
class _Short:
    a: float
    pair: tuple[float, float]
    n: int


def test_typed_params_of_a_batch(device: Any, so: Any) -> None:
    """Unknown names, wrong field types and sizes in a batch's dispatch and in Command.update: refused, and the
    command keeps its last good params."""
    typed = device.pipeline(TYPED, buffers=2, workgroup_size=(64, 1, 1))
    data = np.arange(N, dtype=F32)
    x, y = device.upload(data), device.alloc(N, "float32")
    good = {"a": 2.0, "pair": (1.0, 0.0), "n": N, "k": 0}
    batch = device.batch()
    run = batch.dispatch(typed, [x, y], N // 64, good)
    dtype = typed.interface.params.numpy_dtype()
    wide = np.zeros((), [(name, "<f8" if name == "a" else dtype[name].base.str, dtype[name].shape)
                         for name in dtype.names])
    narrow_pair = np.zeros((), [("a", "<f4"), ("pair", "<f4", 3), ("n", "<u4"), ("k", "<i4")])
    before = live(device)
    for bad in ({**good, "b": 1.0}, {**good, "pair": (1.0, 2.0, 3.0)}, {**good, "k": 1.5},
                {**good, "n": 2**32}, {**good, "pair": {"x": 1.0, "y": 2.0}}, wide[()], narrow_pair[()],
                _Short(1.0, (0.0, 0.0), N), b"\0" * 20, np.zeros(6, np.float64)):
        message = refused(InvalidArgument, DISPATCH, run.update, params=bad)
        assert "params" in message
        refused(InvalidArgument, DISPATCH, batch.dispatch, typed, [x, y], 1, bad)
    assert len(batch) == 1 and live(device) == before
    device.submit(batch).wait(timeout=60)
    np.testing.assert_array_equal(device.download(y), data * 2 + 1)
    usable(device, so)


def test_nested_typed_params(device: Any, so: Any) -> None:
    """A nested struct, an array, a 64-bit scalar and an int vector by name: packed at the reflected std430
    offsets; a wrong field anywhere in the tree is refused, naming it."""
    if not device.info.features.get("shaderInt64"):  # a typed refusal of the 64-bit module, no crash
        with pytest.raises((CompileError, InvalidArgument, Unsupported)):
            device.pipeline(NESTED, buffers=2)
        usable(device, so)
        return
    nested = device.pipeline(NESTED, buffers=2, workgroup_size=(64, 1, 1))
    block = nested.interface.params
    assert block.names == ("first", "weights", "n", "offset")
    data = np.arange(N, dtype=F32)
    x, y = device.upload(data), device.alloc(N, "float32")
    good: dict[str, Any] = {"first": {"scale": 2.0, "shift": 1.0}, "weights": (1.0, 2.0, 3.0), "n": N,
                            "offset": (5, 2)}
    want = (data * 2 + 1) * 6 + 3
    device.dispatch(nested, [x, y], N // 64, good).wait(timeout=60)
    np.testing.assert_array_equal(device.download(y), want)
    record = np.zeros((), block.numpy_dtype())
    record["first"]["scale"], record["first"]["shift"], record["weights"] = 2.0, 1.0, (1.0, 2.0, 3.0)
    record["n"], record["offset"] = N, (5, 2)
    device.write(y, np.zeros(N, F32))
    device.dispatch(nested, [x, y], N // 64, record[()]).wait(timeout=60)  # a numpy structured scalar
    np.testing.assert_array_equal(device.download(y), want)
    before = live(device)
    for change in ({"first": {"scale": 2.0}}, {"first": {"scale": 2.0, "shift": 1.0, "skew": 0.0}},
                   {"first": (2.0, 1.0, 0.0)}, {"first": 2.0}, {"weights": (1.0, 2.0)},
                   {"weights": (1.0, 2.0, 3.0, 4.0)}, {"n": -1}, {"n": 2**64}, {"n": 1.5}, {"offset": (1.5, 2.0)},
                   {"offset": (1, 2, 3)}, {"first": {"scale": "2", "shift": 1.0}}):
        message = refused(InvalidArgument, "dispatch", device.dispatch, nested, [x, y], 1, {**good, **change})
        assert "params" in message
    assert live(device) == before
    device.dispatch(nested, [x, y], N // 64, {**good, "n": 2**40}).wait(timeout=60)  # a 64-bit count, past 32
    np.testing.assert_array_equal(device.download(y), want)
    usable(device, so)


def test_constants_of_the_wrong_type_or_range(device: Any, so: Any) -> None:
    before = live(device)
    for bad in ({"SCALE": 1e300}, {"SCALE": float("inf")}, {"SCALE": 10**400}, {"BIAS": 2**31},
                {"BIAS": -(2**31) - 1}, {"BIAS": np.float32(1)}, {"SCALE": True}, {99: 1}, {"BIAS": "3"},
                {"SCALE": np.array([1.0])}):
        message = refused(InvalidArgument, "pipeline", device.pipeline, CONSTANTS, buffers=2,
                          workgroup_size=(64, 1, 1), constants=bad)
        assert "constant" in message
    assert live(device) == before  # no VkPipeline, module or layout was made
    special = device.pipeline(CONSTANTS, buffers=2, workgroup_size=(64, 1, 1), constants={"SCALE": 0.5, 1: -1})
    x, y = device.upload(np.arange(N, dtype=F32)), device.alloc(N, "float32")
    device.dispatch(special, [x, y], N // 64, (np.uint32(N),)).wait(timeout=60)
    np.testing.assert_array_equal(device.download(y), np.arange(N, dtype=F32) * F32(0.5) - 1)
    usable(device, so)


# -- mapping and DLPack ----------------------------------------------------------------------------------

def test_device_memory_is_never_mapped(device: Any, so: Any) -> None:
    buf = device.alloc(N, "float32", memory="device")
    before = live(device)
    assert not buf.host_visible
    refused(InvalidArgument, "map", lambda: buf.map().__enter__())
    refused(InvalidArgument, "map", lambda: buf.map(write=False).__enter__())
    refused(InvalidState, "__array__", np.asarray, buf)
    refused(InvalidState, "__dlpack__", buf.__dlpack__)
    with pytest.raises((InvalidState, BufferError, RuntimeError)):
        np.from_dlpack(buf)
    assert live(device) == before
    device.write(buf, np.ones(N, F32))
    np.testing.assert_array_equal(device.download(buf), np.ones(N, F32))
    usable(device, so)


def test_dlpack_of_another_device_or_dtype(device: Any, other: Any, so: Any) -> None:
    class OnDevice:
        def __init__(self, kind: int):
            self.kind = kind

        def __dlpack_device__(self) -> tuple[int, int]:
            return (self.kind, 0)

        def __dlpack__(self, **kwargs: Any) -> Any:
            raise AssertionError("a tensor on another device must be refused before it is taken")

    before = live(device)
    for kind in (2, 4, 7, 10, 13, 15):  # CUDA, OpenCL, Vulkan, ROCm, CUDA managed, WebGPU
        message = refused(InvalidArgument, "from_dlpack", device.from_dlpack, OnDevice(kind))
        assert "export_memory" in message
    class NoDevice:
        def __dlpack_device__(self) -> Any:
            return "cpu"
    refused(InvalidArgument, "from_dlpack", device.from_dlpack, NoDevice())
    if "host" in other.memory_kinds and "dlpack" in other.features:
        theirs = other.alloc(N, "float32", memory="host")  # another device's host memory: a copy, not an alias
        with theirs.map() as view:
            view[:] = 1
        copied = device.from_dlpack(theirs)
        with theirs.map() as view:
            view[:] = 3
        np.testing.assert_array_equal(device.download(copied), np.ones(N, F32))
        copied.close()
    object_array = np.array([object()] * 4)
    with pytest.raises((InvalidArgument, TypeError)):
        device.from_dlpack(object_array)
    assert live(device) == before
    usable(device, so)


# -- external memory and fences: closed, foreign and too-small fds ----------------------------------------

def _memfd(name: str, nbytes: int) -> int:
    fd = os.memfd_create(f"ironaccel-test-{name}")
    os.ftruncate(fd, nbytes)
    return fd


def holders(fd: int) -> int:
    """How many of this process's fds are open on `fd`'s file (a refused import must close its duplicate)."""
    target = os.readlink(f"/proc/self/fd/{fd}")
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{name}") == target
        except OSError:  # the listing's own fd, gone
            pass
    return count


def refused_import(ext: Any, call: Any, *args: Any) -> str:
    """`call(ext, *args)` (an import) refused with InvalidArgument, closing the duplicate of `ext`'s fd it took;
    on a thread, so that a driver blocking on the fd fails the test instead of hanging it."""
    held = holders(ext.fd)
    message = refused(InvalidArgument, call.__name__, within, 30, call, ext, *args)
    assert holders(ext.fd) == held, "the import kept a duplicate of the fd"
    ext.close()
    return message


def _driver_refusals_only() -> None:
    """Where the driver or layer reported the refused imports, that is all it reported."""
    for error in validation.errors():
        text = str(error).lower()
        assert any(word in text for word in ("external", "import", "memory", "semaphore", " fd")), error
    validation.clear_errors()


@pytest.mark.validation_errors_expected  # the driver reports the fds it refuses; checked by _driver_refusals_only
def test_import_memory_of_bad_fds(device: Any, so: Any) -> None:
    if "import_memory" not in device.features:
        refused(Unsupported, "import_memory", device.import_memory, ExternalMemory(-1, 16), 4)
        return
    reader, writer = os.pipe()
    left, right = socket.socketpair()
    null = os.open(os.devnull, os.O_RDWR)
    source = device.alloc(N, "float32", exportable=True)
    exported = device.export_memory(source)
    device.import_memory(exported, N, "float32").close()  # the driver's import path, warmed before counting
    device.synchronize()  # and what the close deferred, done
    before = live(device)
    closed = ExternalMemory(_memfd("closed", 4096), 4096)
    os.close(closed.fd)
    refused(InvalidArgument, "import_memory", device.import_memory, closed, 4)  # its fd was closed under it
    closed.fd = -1
    refused(ClosedError, "import_memory", device.import_memory, closed, 4)
    for fd in (reader, writer, left.fileno(), null):  # lavapipe reads a header from the fd: a pipe would block it
        refused_import(ExternalMemory(os.dup(fd), 4096), device.import_memory, 16)
    message = refused_import(ExternalMemory(_memfd("small", 64), 1 << 20), device.import_memory, 1 << 18)
    if device.info.device_type == TYPE_CPU:  # lavapipe exports memfds: this one says 1 MiB and holds 64 bytes
        assert "64 bytes" in message
    else:  # a GPU driver's exports are its device files: a memfd is refused by its kind first
        assert "not of the kind this driver exports" in message
    refused_import(ExternalMemory(_memfd("plain", 1 << 16), 1 << 16), device.import_memory, 16)  # no driver's export
    if device.info.device_type == TYPE_CPU:  # lavapipe's export is a memfd whose size shows; a GPU's opaque fd
        liar = ExternalMemory(os.dup(exported.fd), exported.size * 64)  # does not, and Vulkan cannot ask it
        refused_import(liar, device.import_memory, exported.size * 16, "float32")
    assert live(device) == before
    _driver_refusals_only()
    seen = device.import_memory(exported, N, "float32")  # the good export still imports
    device.write(source, np.arange(N, dtype=F32))
    device.synchronize()
    np.testing.assert_array_equal(device.download(seen), np.arange(N, dtype=F32))
    exported.close()
    for fd in (reader, writer, null):
        os.close(fd)
    left.close()
    right.close()
    usable(device, so)


@pytest.mark.validation_errors_expected
def test_import_fence_of_bad_fds(device: Any, so: Any) -> None:
    if "import_fence" not in device.features:
        refused(Unsupported, "import_fence", device.import_fence, ExternalFence(-1))
        return
    reader, writer = os.pipe()
    source = device.alloc(N, "float32", exportable=True)
    memory = device.export_memory(source)
    fence = device.create_fence(exportable=True)
    with device.export_fence(fence) as good:
        device.import_fence(good).close()  # the driver's import path, warmed before counting
    device.synchronize()  # and what the close deferred, done
    before = live(device)
    refused(ClosedError, "import_fence", device.import_fence, ExternalFence(-1))
    gone = ExternalFence(os.dup(reader))
    os.close(gone.fd)
    refused(InvalidArgument, "import_fence", device.import_fence, gone)
    gone.fd = -1
    for fd in (reader, writer):
        refused_import(ExternalFence(os.dup(fd)), device.import_fence)
    if device.info.device_type == TYPE_CPU:  # lavapipe tells a memory fd from a semaphore's
        refused_import(ExternalFence(os.dup(memory.fd)), device.import_fence)  # memory, not a semaphore
    assert live(device) == before
    _driver_refusals_only()
    memory.close()
    os.close(reader)
    os.close(writer)
    device.queue.signal(fence, 1)
    fence.wait(1, timeout=60)
    usable(device, so)


def test_gpu_memory_imports_refuse_fds_of_another_kind_before_the_driver() -> None:
    """On a GPU device a memory fd must look like the driver's own exports (NVIDIA's are /dev/nvidiactl): a memfd
    or another device's file never reaches the driver (NVIDIA's 580, refusing one, fails every later
    vkAllocateMemory of the process).  Checked with a stand-in device whose exports are a character device."""
    from types import SimpleNamespace

    from ironaccel_vulkan.external import check_fd, foreign
    from ironaccel_vulkan.physical import TYPE_DISCRETE

    nvidiactl = (stat.S_IFCHR, os.makedev(195, 255))
    core = SimpleNamespace(info=SimpleNamespace(device_type=TYPE_DISCRETE), export_kind=nvidiactl)
    memfd, null = _memfd("kind", 4096), os.open(os.devnull, os.O_RDWR)
    try:
        for fd, what in ((memfd, "memfd"), (null, "/dev/null")):
            with pytest.raises(InvalidArgument, match="not of the kind this driver exports") as info:
                check_fd(core, fd, 4096, "import_memory")  # type: ignore[arg-type]
            assert info.value.op == "import_memory", what
        check_fd(core, null, None, "import_fence")  # type: ignore[arg-type]  # fences are not judged by kind
        same_driver = SimpleNamespace(st_mode=stat.S_IFCHR | 0o666, st_rdev=os.makedev(195, 0), st_dev=6)
        assert not foreign(same_driver, nvidiactl)  # type: ignore[arg-type]  # another node of the same driver
        anonymous = SimpleNamespace(st_mode=0o600, st_rdev=0, st_dev=14)
        assert not foreign(anonymous, nvidiactl)  # type: ignore[arg-type]  # left for the driver to judge
        lavapipe = (stat.S_IFREG, os.fstat(memfd).st_dev)
        assert not foreign(os.fstat(memfd), lavapipe)  # a driver whose exports are memfds
        assert foreign(os.fstat(null), lavapipe)
    finally:
        os.close(memfd)
        os.close(null)
