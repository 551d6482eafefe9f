"""What ironaccel-cuda's tests share: kernels, expectations, fixtures, the fake drivers, child processes.

tests/conftest.py puts tests/ on sys.path, so every test module imports these as `helpers.<module>` in
either pytest import mode (`--import-mode=importlib`, the repository's setting, or prepend):

    fixtures            the GPU suite's fixtures and hooks (dev, two, kernels, wait_until, the multi_gpu mark),
                        re-exported by tests/conftest.py
    suite               which test modules form the GPU suite (run on a GPU and against the fake driver)
    fakes               builds the fake libcuda (tests/fakecuda) and fake libnccl (tests/fakenccl); runs pytest on them
    kernels             the CUDA C++ kernels the GPU tests share (the fake driver implements them too)
    expect              `raises_exactly`: what a bad-input test expects of an error
    cbuild              a C compiler, cuda.h and the fatbinary tool, for the tests that build C or fatbins
    nccl_checks         every NCCL collective checked against numpy; `launch` starts nccl_worker.py per rank
    nccl_worker         one rank of a process-per-GPU NCCL test (run by path by nccl_checks.launch)
    ipc_children        what ipc/test_ipc.py's spawned children run
    zero_copy_children  what interop/test_zero_copy.py runs in a process of its own (python -m, from tests/)
"""

from __future__ import annotations

import os

#: True under the fake libcuda (test_fake_driver.py sets IRONACCEL_CUDA_FAKE=1): the few checks only a real GPU can
#: make look at it.
FAKE = os.environ.get("IRONACCEL_CUDA_FAKE") == "1"
