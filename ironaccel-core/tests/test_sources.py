"""Source objects (`ironaccel.compute.sources`): code in a language no device compiles, translated per device.

Checked on the test double with a toy translator: the kit compiles what the translator returns, gives the
program the translator's interface (names, params block, workgroup size), leaves the constants to it, keeps
the caller's entry name on the handle, and turns a bad translation into typed errors with the device usable.
"""

from __future__ import annotations

import numpy as np
import pytest

from ironaccel import DType
from ironaccel.compute import BindingInfo, Interface, ParamBlock, Scalar, Translation
from ironaccel.compute.params import layout_struct
from ironaccel.errors import CompileError, InvalidArgument
from ironaccel.testing.double import MemoryBackend

F32, U32 = DType.FLOAT32, DType.UINT32
CODE = """
PARAMS = {"a": "float32", "b": "float32", "n": "uint32"}

def KERNEL(x: "float32", y: "float32", a, b, n):
    y[:n] = x[:n] * a + b * SCALE
"""


class Toy:
    """A "language": the double's Python with the entry renamed and the constants written into the code."""

    def __init__(self, verify=None, result=None):
        self.calls: list[dict] = []
        self.verify, self.result = verify, result

    def __ironaccel_translate__(self, device, entry, constants):
        self.calls.append(constants)
        if self.result is not None:
            return self.result
        code = CODE.replace("KERNEL", f"{entry}_impl") + f"\nSCALE = {constants.get('SCALE', 1)}\n"
        block = ParamBlock(layout_struct(entry, [("alpha", Scalar(F32)), ("beta", Scalar(F32)),
                                                 ("count", Scalar(U32))], "c"), "c")
        interface = Interface((F32, F32), (False, True), (BindingInfo("src", 0, F32, False),
                                                          BindingInfo("dst", 1, F32, True)), block)
        return Translation(code, f"{entry}_impl", ("toy", code), 3, (8, 1, 1), interface, self.verify)


@pytest.fixture
def device():
    dev = MemoryBackend().open(0)
    yield dev
    dev.close()


def run(device, pipeline, params):
    x = device.upload(np.arange(8, dtype=np.float32))
    y = device.alloc(8, "float32")
    device.dispatch(pipeline, [x, y], 1, params)
    return device.download(y)


def test_the_translation_is_compiled_and_bound_by_the_translators_names(device):
    toy = Toy()
    pipeline = device.pipeline(toy, "k", buffers=2)
    assert pipeline.entry == "k" and pipeline.workgroup_size == (8, 1, 1)
    assert [b.name for b in pipeline.interface.bindings] == ["src", "dst"]
    assert pipeline.interface.params.names == ("alpha", "beta", "count")
    np.testing.assert_array_equal(run(device, pipeline, {"alpha": 2.0, "beta": 1.0, "count": 8}),
                                  np.arange(8) * 2 + 1)
    assert device.pipeline(toy, "k", buffers=2).program is pipeline.program  # cached
    with pytest.raises(InvalidArgument, match="gamma"):
        run(device, pipeline, {"alpha": 2.0, "beta": 1.0, "gamma": 8})


def test_constants_go_to_the_translator_not_the_device(device):
    toy = Toy()
    pipeline = device.pipeline(toy, "k", buffers=2, constants={"SCALE": 3})  # the double would refuse SCALE
    assert toy.calls[-1] == {"SCALE": 3}
    np.testing.assert_array_equal(run(device, pipeline, (1.0, 1.0, 8)), np.arange(8) + 3)


def test_bad_translations_are_typed_errors_and_the_device_stays_usable(device):
    with pytest.raises(InvalidArgument, match=r"takes 2 buffers \(src, dst\)"):
        device.pipeline(Toy(), "k", buffers=3)
    with pytest.raises(InvalidArgument, match="not an ironaccel.compute.Translation"):
        device.pipeline(Toy(result="code"), "k", buffers=2)

    def disagree(own: Interface) -> None:
        raise CompileError("memory", "pipeline", "the layouts disagree")

    with pytest.raises(CompileError, match="disagree"):
        device.pipeline(Toy(verify=disagree), "k", buffers=2)
    pipeline = device.pipeline(Toy(), "k", buffers=2)
    np.testing.assert_array_equal(run(device, pipeline, (1.0, 0.0, 8)), np.arange(8))


def test_plain_code_is_never_a_source_object(device):
    from ironaccel.testing.double import SCALE_OFFSET

    pipeline = device.pipeline(SCALE_OFFSET, "main", buffers=2)
    np.testing.assert_array_equal(run(device, pipeline, (np.float32(2), np.float32(1), np.uint32(8))),
                                  np.arange(8) * 2 + 1)
