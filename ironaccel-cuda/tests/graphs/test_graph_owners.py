"""What a graph node uses lives as long as the driver can run the node (CUDA user objects).

`_core.graph_attach` holds a Python object through a user object of a graph; the driver hands references
on to clones made through the raw handle and to executable graphs, and releases the last one after the
graph is destroyed and its launches are done.  The cuda.core compat holds every node's attachments that
way (its side: ironaccel-cuda-compat's tests/gpu/test_compat_graph_owners.py).  Results are read back from
device memory.
"""

from __future__ import annotations

import ctypes
import gc
import threading
import time
import weakref

import pytest
from helpers.fixtures import _wait_until as wait_until

pytestmark = pytest.mark.backend("cuda")

N = 64


class Sentinel:
    """A weak-referenceable owner that records the thread that dropped it."""

    def __init__(self, dropped: list[int] | None = None):
        self.dropped = dropped

    def __del__(self) -> None:
        if self.dropped is not None:
            self.dropped.append(threading.get_ident())


class Recording:
    """A host function that counts its calls."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self) -> None:
        self.calls.append(1)


def drv(name: str, *args):
    from cuda.bindings import driver

    err, *out = getattr(driver, name)(*args)
    assert int(err) == 0, (name, err)
    return out[0] if len(out) == 1 else out


def read(ptr: int, nbytes: int) -> bytes:
    out = (ctypes.c_ubyte * nbytes)()
    drv("cuMemcpyDtoH", out, ptr, nbytes)
    return bytes(out)


# -- the core primitive -------------------------------------------------------------------------------------


def test_an_owner_lives_while_a_raw_clone_holds_it(dev):
    from cuda.bindings import driver

    import ironaccel_cuda as cu
    from ironaccel_cuda import _core

    dropped: list[int] = []
    g = cu.Graph(dev)
    owner = Sentinel(dropped)
    ref = weakref.ref(owner)
    user_object = _core.graph_attach(int(g._h), owner)
    assert user_object != 0
    del owner
    clone = drv("cuGraphClone", driver.CUgraph(int(g._h)))
    g.close()
    gc.collect()
    _core.drain_owners()
    assert ref() is not None, "the clone's reference must keep the owner"
    exe = drv("cuGraphInstantiate", clone, 0)
    drv("cuGraphDestroy", clone)
    time.sleep(0.05)
    _core.drain_owners()
    assert ref() is not None, "the executable graph's reference must keep the owner"
    drv("cuGraphExecDestroy", exe)
    wait_until(lambda: ref() is None)
    assert dropped == [threading.main_thread().ident], "owners are dropped on the main thread"


def test_detach_gives_the_graphs_reference_back(dev):
    import ironaccel_cuda as cu
    from ironaccel_cuda import _core

    g = cu.Graph(dev)
    owner = Sentinel()
    ref = weakref.ref(owner)
    user_object = _core.graph_attach(int(g._h), owner)
    del owner
    _core.graph_detach(int(g._h), user_object)
    wait_until(lambda: ref() is None)
    assert _core.owners_pending() == 0
    g.close()


def test_a_bad_graph_handle_is_a_typed_error_and_keeps_nothing(dev):
    from ironaccel_cuda import _core
    from ironaccel_cuda.errors import DriverError

    owner = Sentinel()
    ref = weakref.ref(owner)
    with pytest.raises(DriverError, match="cuGraphRetainUserObject"):
        _core.graph_attach(0, owner)
    del owner
    wait_until(lambda: ref() is None)


def test_dropping_a_running_executable_graph_keeps_its_host_function(dev, kernels):
    """ironaccel's own Graph: the executable holds what the graph's nodes use through the driver too, so a
    GraphExec dropped (closed by GC) while its launch still spins runs its host function all the same, then
    lets it go."""
    from helpers import FAKE

    import ironaccel_cuda as cu
    from ironaccel_cuda import _core

    def build(callback: Recording):
        g = cu.Graph(dev)
        spin = g.add_kernel(kernels.function("spin"), 1, 1, 500_000_000)  # ~0.25 s on the H200
        g.add_host_func(callback, after=[spin])
        exe = g.instantiate()
        g.close()
        return exe

    callback = Recording()
    called, ref = callback.calls, weakref.ref(callback)
    exe = build(callback)
    del callback
    s = dev.create_stream()
    exe.launch(s)
    del exe  # nothing in Python holds the graph's objects any more (refcounting closes it: no gc pass, which
    _core.drain_owners()  # took longer than the spin on the H200's test process)
    if not FAKE:
        assert not s.query(), "the spin kernel should still be running"
        assert ref() is not None, "the running launch must keep the host function"
    s.synchronize()
    assert called == [1]
    wait_until(lambda: ref() is None)
    s.close()


def test_a_host_function_set_on_the_executable_alone_is_held_while_it_runs(dev, kernels):
    """A parameter given to the executable graph only (GraphExec.set_params) goes into the lists the driver's user
    object holds, so it too outlives a GraphExec dropped while its launch spins."""
    from helpers import FAKE

    import ironaccel_cuda as cu
    from ironaccel_cuda import _core

    first, second = Recording(), Recording()
    ref = weakref.ref(second)

    def build(replacement: Recording):
        g = cu.Graph(dev)
        spin = g.add_kernel(kernels.function("spin"), 1, 1, 500_000_000)  # ~0.25 s on the H200
        host = g.add_host_func(first, after=[spin])
        exe = g.instantiate()
        exe.set_params(host, replacement)
        g.close()
        return exe

    exe = build(second)
    calls = second.calls
    del second
    s = dev.create_stream()
    exe.launch(s)
    del exe
    _core.drain_owners()
    if not FAKE:
        assert not s.query(), "the spin kernel should still be running"
        assert ref() is not None, "the running launch must keep the host function set on the executable"
    s.synchronize()
    assert calls == [1] and first.calls == []
    wait_until(lambda: ref() is None)
    s.close()

