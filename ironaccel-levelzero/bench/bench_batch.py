"""Benchmark (not a test): Level Zero command batches -- a recorded batch against plain dispatches, and a
re-submitted batch against the same vendor calls made directly through ctypes.

    python ironaccel-levelzero/bench/bench_batch.py [--fake] [--ordinal N] [--pairs N] [--json out.json]

Cases (bench/harness.py rounds, bench/versus.py report; ratio = first side / second side):

* batch100_vs_plain100: 100 small dispatches (scale_offset on 1024 floats) recorded in one batch and submitted
  once, waited, against the same 100 as plain `device.dispatch` calls and one synchronize (target <= 0.2,
  i.e. at least 5x faster per dispatch);
* resubmit_vs_direct: that recorded batch re-submitted and waited, against a command list with the same 100
  launches recorded once directly on the loader (zeCommandListAppendLaunchKernel + barriers) and executed with
  zeCommandQueueExecuteCommandLists, zeFenceHostSynchronize, zeFenceReset (target <= 1.1).

`--fake` builds tests/fake/fake_ze_driver.c and names it in ZE_ENABLE_ALT_DRIVERS (no Intel GPU here): the
kernels then run on the host, so the figures measure the host-side cost of each path, not a GPU.
"""

from __future__ import annotations

import argparse
import ctypes as c
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "bench"))

from harness import Case  # noqa: E402
from versus import compare, publish, repeat, report  # noqa: E402

KERNELS = (HERE.parent / "tests" / "kernels" / "kernels.spv").read_bytes()
N, WG, COUNT = 1024, 64, 100


def build_fake() -> str:
    from ironaccel.testing import cbuild

    headers = [Path("/usr/include/level_zero/ze_api.h"), Path("/usr/include/level_zero/ze_ddi.h")]
    out = Path(tempfile.mkdtemp(prefix="ironaccel-ze-bench-")) / "libze_ironaccel_fake.so"
    return str(cbuild.build([HERE.parent / "tests" / "fake" / "fake_ze_driver.c"], out, shared=True,
                            headers=headers, flags=["-D_POSIX_C_SOURCE=200809L"]))


class Direct:
    """The same 100 launches on the loader through ctypes: one context, queue, module, kernel, list and fence."""

    def __init__(self, ordinal: int):
        from ironaccel_levelzero import api, devices, loader
        from ironaccel_levelzero.loader import check

        ld = loader.load()
        self.lib = lib = api.declare(ld)
        self.api, self.check = api, check
        pairs = [(d, v) for d in devices.drivers(ld) for v in devices.devices_of(ld, d)]
        driver, dev = pairs[ordinal]
        ctx, queue, module, kernel, lst, fence = (c.c_void_p() for _ in range(6))
        check(lib.zeContextCreate(driver, c.byref(api.ContextDesc()), c.byref(ctx)), "zeContextCreate")
        check(lib.zeCommandQueueCreate(ctx, dev, c.byref(api.CommandQueueDesc(mode=api.QUEUE_MODE_ASYNCHRONOUS)),
                                       c.byref(queue)), "zeCommandQueueCreate")
        src = c.create_string_buffer(KERNELS, len(KERNELS))
        desc = api.ModuleDesc(format=api.MODULE_FORMAT_IL_SPIRV, inputSize=len(KERNELS),
                              pInputModule=c.cast(src, c.c_void_p), pBuildFlags=b"")
        check(lib.zeModuleCreate(ctx, dev, c.byref(desc), c.byref(module), None), "zeModuleCreate")
        check(lib.zeKernelCreate(module, c.byref(api.KernelDesc(pKernelName=b"scale_offset")), c.byref(kernel)),
              "zeKernelCreate")
        check(lib.zeKernelSetGroupSize(kernel, WG, 1, 1), "zeKernelSetGroupSize")
        self.x, self.y = c.c_void_p(), c.c_void_p()
        for ptr in (self.x, self.y):
            check(lib.zeMemAllocDevice(ctx, c.byref(api.DeviceMemAllocDesc()), N * 4, 64, dev, c.byref(ptr)),
                  "zeMemAllocDevice")
        self.ctx, self.queue, self.module, self.kernel = ctx, queue, module, kernel
        check(lib.zeCommandListCreate(ctx, dev, c.byref(api.CommandListDesc()), c.byref(lst)), "zeCommandListCreate")
        check(lib.zeFenceCreate(queue, c.byref(api.FenceDesc()), c.byref(fence)), "zeFenceCreate")
        host = np.arange(N, dtype=np.float32)  # x = 0, 1, 2, ... as on ironaccel's side
        check(lib.zeCommandListAppendMemoryCopy(lst, self.x, host.ctypes.data, N * 4, None, 0, None),
              "zeCommandListAppendMemoryCopy")
        check(lib.zeCommandListClose(lst), "zeCommandListClose")
        check(lib.zeCommandQueueExecuteCommandLists(queue, 1, c.byref(lst), fence), "zeCommandQueueExecuteCommandLists")
        check(lib.zeFenceHostSynchronize(fence, api.WAIT_FOREVER), "zeFenceHostSynchronize")
        check(lib.zeFenceReset(fence), "zeFenceReset")
        check(lib.zeCommandListReset(lst), "zeCommandListReset")
        args = [(8, c.byref(self.x)), (8, c.byref(self.y)), (4, c.byref(c.c_float(2.0))),
                (4, c.byref(c.c_float(1.0))), (4, c.byref(c.c_uint32(N)))]
        for i, (size, value) in enumerate(args):
            check(lib.zeKernelSetArgumentValue(kernel, i, size, value), "zeKernelSetArgumentValue")
        groups = api.GroupCount(N // WG, 1, 1)
        for _ in range(COUNT):
            check(lib.zeCommandListAppendLaunchKernel(lst, kernel, c.byref(groups), None, 0, None),
                  "zeCommandListAppendLaunchKernel")
            check(lib.zeCommandListAppendBarrier(lst, None, 0, None), "zeCommandListAppendBarrier")
        check(lib.zeCommandListClose(lst), "zeCommandListClose")
        self.lst, self.fence = lst, fence
        self.lists = (c.c_void_p * 1)(lst.value)

    def run_once(self) -> None:
        lib = self.lib
        lib.zeCommandQueueExecuteCommandLists(self.queue, 1, self.lists, self.fence)
        lib.zeFenceHostSynchronize(self.fence, self.api.WAIT_FOREVER)
        lib.zeFenceReset(self.fence)

    def close(self) -> None:
        lib = self.lib
        lib.zeFenceDestroy(self.fence)
        lib.zeCommandListDestroy(self.lst)
        lib.zeMemFree(self.ctx, self.x)
        lib.zeMemFree(self.ctx, self.y)
        lib.zeKernelDestroy(self.kernel)
        lib.zeModuleDestroy(self.module)
        lib.zeCommandQueueDestroy(self.queue)
        lib.zeContextDestroy(self.ctx)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fake", action="store_true", help="run on the fake driver (host figures)")
    parser.add_argument("--ordinal", type=int, default=0)
    parser.add_argument("--pairs", type=int, default=41)
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.fake:
        os.environ["ZE_ENABLE_ALT_DRIVERS"] = build_fake()
    from ironaccel.registry import registry

    device = registry.open("levelzero", args.ordinal)
    pipeline = device.pipeline(KERNELS, "scale_offset", buffers=2, params=3, workgroup_size=(WG, 1, 1))
    x, y = device.upload(np.arange(N, dtype=np.float32)), device.alloc(N, "float32")
    params = (np.float32(2), np.float32(1), np.uint32(N))
    batch = device.batch()
    for _ in range(COUNT):
        batch.dispatch(pipeline, [x, y], N // WG, params)
    expected = np.float32(2) * np.arange(N, dtype=np.float32) + 1

    def check_y() -> None:
        y_now = device.download(y)
        if not np.array_equal(y_now, expected):
            raise AssertionError("the dispatches did not compute y = 2x + 1")

    def batched() -> None:
        device.submit(batch).wait()

    def plain() -> None:
        for _ in range(COUNT):
            device.dispatch(pipeline, [x, y], N // WG, params)
        device.synchronize()

    direct = Direct(args.ordinal)

    def check_direct() -> None:
        direct.run_once()
        out = np.empty(N, np.float32)
        c.memmove(out.ctypes.data, direct.y, N * 4)  # the fake's device memory is host memory
        if not np.array_equal(out, expected):
            raise AssertionError("the direct side did not compute y = 2x + 1")

    def check_batched() -> None:
        batched()
        check_y()

    def check_plain() -> None:
        plain()
        check_y()

    cases = [
        compare("batch100_vs_plain100", Case(repeat(batched), check=check_batched),
                Case(repeat(plain), check=check_plain), rounds=args.pairs, target=0.2),
        compare("resubmit_vs_direct", Case(repeat(batched), check=check_batched),
                Case(repeat(direct.run_once), check=check_direct if args.fake else None, close=direct.close),
                rounds=args.pairs, target=1.1),
    ]
    facts = {"driver": "fake (host)" if args.fake else "installed", "dispatches": COUNT, "elements": N}
    publish(report("levelzero", device.descriptor.name, "plain dispatches / direct ctypes on the loader", facts,
                   cases), args.json)
    batch.close()
    device.close()


if __name__ == "__main__":
    main()
