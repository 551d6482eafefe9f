"""The tests' layout: a folder per concept, the GPU suite and the CPU-only modules told apart by helpers/suite.py.

The GPU suite (run on a GPU and, through test_fake_driver.py, against the fake libcuda) is read from each
module's `pytestmark`; these checks keep that reading honest, so that a module cannot drop out of the fake-driver
run, or a CPU-only module join it, without saying so.
"""

from __future__ import annotations

from helpers import suite

TESTS = suite.TESTS


def test_every_test_module_lives_in_a_concept_folder():
    top = {p.name for p in TESTS.glob("test_*.py")}
    assert top == {"test_fake_driver.py", "test_suite_layout.py"}, top  # the whole suite's checks, nothing else
    assert not list((TESTS / "helpers").glob("test_*.py"))


def test_the_gpu_suite_is_marked_and_the_cpu_only_modules_are_not():
    gpu, cpu = suite.gpu_suite(), suite.cpu_only()
    assert sorted(gpu + cpu) == suite.test_modules() and not set(gpu) & set(cpu)
    assert len(gpu) > 40 and len(cpu) > 10
    for name in suite.OWN_SKIPS:
        assert (TESTS / name).is_file(), f"OWN_SKIPS names {name}, which does not exist"
        marked = suite.marks(TESTS / name) & {"backend(cuda)", "multi_gpu"}
        assert not marked, f"{name} is marked {marked}: drop it from OWN_SKIPS"
    for path in cpu:
        assert "backend(cuda)" not in suite.marks(path), path


def test_test_file_names_are_unique():
    """One basename per test module, so that pytest's prepend import mode finds each by its name too."""
    names = [p.name for p in suite.test_modules()]
    assert sorted(names) == sorted(set(names))


def test_the_fake_driver_runs_the_gpu_suite_and_the_conformance_suite():
    assert TESTS / "compute" / "test_conformance.py" in suite.cpu_only()
    assert TESTS / "interop" / "test_interop.py" in suite.gpu_suite()  # left out there: CuPy and PyTorch need a GPU
    for name in ("memory/test_memory.py", "memory/test_pinned.py", "memory/test_transfer.py",
                 "streams/test_stream_event.py", "collectives/test_nccl.py", "collectives/test_nccl_multi.py",
                 "collectives/test_nccl_faults.py"):  # the fake-driver runs' other files
        assert TESTS / name in suite.gpu_suite(), name
