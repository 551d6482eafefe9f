"""The cuda.core compat's IPC names without a GPU: handle and descriptor rules, and install() in spawned children.

The device-side checks are in tests/gpu/test_compat_cuda_core_ipc.py.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import pytest

from ironaccel_cuda_compat import cuda_core as cc


def test_allocation_handle_owns_its_descriptor_and_refuses_plain_pickle():
    from ironaccel_cuda_compat.cuda_core._memory._ipc import IPCAllocationHandle

    with pytest.raises(ValueError, match=r"Invalid allocation handle \(fd\) -1: must be non-negative"):
        IPCAllocationHandle._init(-1, None)
    with pytest.raises(RuntimeError, match="cannot be instantiated directly"):
        IPCAllocationHandle()
    r, w = os.pipe()
    os.close(w)
    handle = IPCAllocationHandle._init(r, "u")
    assert int(handle) == r and handle.handle == r and handle.uuid == "u" and not handle.is_closed
    with pytest.raises(TypeError, match="multiprocessing"):
        pickle.dumps(handle)
    handle.close()
    handle.close()
    assert handle.is_closed
    with pytest.raises(OSError):
        os.fstat(r)  # closed by the handle
    with pytest.raises(ValueError, match="is closed"):
        int(handle)


def test_buffer_descriptor_pickles_and_is_checked_before_any_import():
    from ironaccel_cuda_compat.cuda_core._memory import IPCBufferDescriptor

    desc = IPCBufferDescriptor._init(b"\x01" * 64, 128)
    back = pickle.loads(pickle.dumps(desc))
    assert back.size == 128 and back.__reduce__()[1] == (b"\x01" * 64, 128)
    with pytest.raises(RuntimeError, match="cannot be instantiated directly"):
        IPCBufferDescriptor()
    with pytest.raises(TypeError, match="Argument 'ipc_descriptor' has incorrect type"):
        cc.Buffer.from_ipc_descriptor(None, object())
    with pytest.raises(TypeError, match="must be imported with a DeviceMemoryResource"):
        cc.Buffer.from_ipc_descriptor(object(), desc)
    with pytest.raises(RuntimeError, match="Memory resource .* was not found"):
        cc.DeviceMemoryResource.from_registry("no-such-uuid")


def test_graph_memory_attributes_are_not_made_directly():
    from ironaccel_cuda_compat.cuda_core._memory._graph_memory_resource import GraphMemoryResourceAttributes

    with pytest.raises(RuntimeError, match="cannot be instantiated directly"):
        GraphMemoryResourceAttributes()


def test_install_carries_into_spawned_children(tmp_path):
    script = tmp_path / "spawned.py"
    script.write_text(textwrap.dedent("""
        import multiprocessing as mp

        def child(q):
            import cuda.core
            q.put(cuda.core.__name__)

        if __name__ == "__main__":
            from ironaccel_cuda_compat import cuda_core
            cuda_core.install()
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            p = ctx.Process(target=child, args=(q,))
            p.start()
            print(q.get(timeout=120))
            p.join(120)
            print(p.exitcode)
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ironaccel_cuda_compat.cuda_core", "0"], out.stdout + out.stderr
