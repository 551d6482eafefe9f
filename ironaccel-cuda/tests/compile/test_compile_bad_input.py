"""Bad input to programs and the linker gets a typed error naming the call.

Each case here once let something else out, or worse: a str taken as one name expression per character, a
raw TypeError or AttributeError from the linker's argument handling, and a LinkSession option list that
nvJitLink's binding read as pointers (a segfault).  Each now raises InvalidArgument naming the operation,
before any driver call.
Every check runs before the driver is asked, so the cases hold on a real GPU as on the fake driver.
"""

from __future__ import annotations

import pytest
from helpers.expect import raises_exactly
from helpers.kernels import SOURCE

import ironaccel_cuda as cu
from ironaccel import InvalidArgument, NotAvailable

pytestmark = pytest.mark.backend("cuda")


# -- programs ----------------------------------------------------------------------------------------


def test_program_name_expressions_not_a_sequence():
    raises_exactly(InvalidArgument, "nvrtcCreateProgram", cu.Program, SOURCE, name_expressions=5)
    # a str would have been taken as one name expression per character
    raises_exactly(InvalidArgument, "nvrtcCreateProgram", cu.Program, SOURCE, name_expressions="saxpy")


# -- linker ----------------------------------------------------------------------------------------------------


def test_linker_options_not_a_sequence(kernel_code):
    # Once TypeError("'int' object is not iterable"); a generator was consumed by the check and linked as ().
    raises_exactly(InvalidArgument, "nvJitLinkAddData", cu.Linker, kernel_code, options=5)
    raises_exactly(InvalidArgument, "nvJitLinkAddData", cu.Linker, kernel_code, options=None)
    assert cu.Linker(kernel_code, options=(o for o in ["-O3"])).options == ("-O3",)


def test_linker_object_code_of_bad_arch(kernel_code):
    # Once AttributeError("'NoneType' object has no attribute 'split'").
    from ironaccel_cuda.program import ObjectCode

    for arch in (None, 90):
        raises_exactly(InvalidArgument, "nvJitLinkAddData", cu.Linker, ObjectCode(kernel_code.code, "cubin", arch))


def test_link_session_bad_arguments(kernel_code):
    # Once a segfault (options [1]: the binding read the int as a char *) and raw TypeErrors.
    from ironaccel_cuda import linker

    try:
        linker._nvjitlink()
    except NotAvailable as exc:
        pytest.skip(f"nvJitLink is not installed: {exc}")
    for options in ([1], 5, "-arch=sm_90", ["-arch=sm_90\0"]):
        raises_exactly(InvalidArgument, "nvJitLinkCreate", linker.LinkSession, options)
    session = linker.LinkSession([f"-arch={kernel_code.arch}"])
    raises_exactly(InvalidArgument, "nvJitLinkAddData", session.add, [], kernel_code.code, "a")
    raises_exactly(InvalidArgument, "nvJitLinkAddData", session.add, "ptx", "text", "a")
    raises_exactly(InvalidArgument, "nvJitLinkAddData", session.add, "cubin", kernel_code.code, 5)
    raises_exactly(InvalidArgument, "nvJitLinkAddFile", session.add_file, {}, "x.a")
    raises_exactly(InvalidArgument, "nvJitLinkAddFile", session.add_file, "library", 5)
    ptx = bytearray(cu.Program(SOURCE).compile("ptx", arch=kernel_code.arch).code.rstrip(b"\0"))
    before = bytes(ptx)
    session.add("ptx", ptx, "saxpy.ptx")  # PTX gets its NUL on a copy: the caller's bytearray stays as it was
    assert ptx == before
    session.close()
