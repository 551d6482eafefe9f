"""Benchmark (not a test): the CUDA ComputeDevice's command batches and its zero-copy hand-over from Vulkan.

    python ironaccel-cuda/bench/bench_batch.py [--pairs N] [--dispatches N] [--mib N] [--json out.json]

Cases (bench/versus.py: interleaved rounds, ratio of times per operation with its bootstrap 95% interval):

* batch_vs_plain: 100 small dispatches (y = a * x + b on 1024 float32, `a` different each dispatch) recorded
  once in a batch and submitted (`device.submit(batch).wait()`), against as many `device.dispatch` calls and
  `device.synchronize()`.  A CUDA batch replays its launches on the queue's stream without the per-call
  checks and per-dispatch events; target <= 1.0 (no slower).
* handover_vs_roundtrip: 256 MiB that a Vulkan device on the same GPU wrote, made a CUDA buffer:
  `cuda.import_memory(vk.export_memory(buf))` (zero-copy: an fd and a mapping) against
  `cuda.upload(vk.download(buf))` (through the host); target <= 0.1.  Needs a Vulkan device that is the same GPU
  (by UUID) with export_memory, and CUDA's import_memory; the case says why it did not run otherwise.

Runs on a GPU (the H200 run); the figures go to ironaccel-cuda/bench/BASELINE.md with --baseline.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from harness import Case
from versus import compare, publish, repeat, report

KERNEL = r"""
extern "C" __global__ void scale_offset(const float* x, float* y, float a, float b, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""
N = 1024


def scale(k: int) -> float:
    return float(1 + k % 7)


class Batches:
    """One batch of `count` dispatches, and the same dispatches made one by one."""

    def __init__(self, device: Any, count: int):
        self.device, self.count = device, count
        self.pipeline = device.pipeline(KERNEL, "scale_offset", buffers=2, params=3, workgroup_size=256)
        self.data = np.arange(N, dtype=np.float32)
        self.x, self.y = device.upload(self.data), device.alloc(N, "float32")
        self.params = [(np.float32(scale(k)), np.float32(1.0), np.uint32(N)) for k in range(count)]
        self.batch = device.batch()
        for params in self.params:
            self.batch.dispatch(self.pipeline, [self.x, self.y], N // 256, params)

    def submit(self) -> None:
        self.device.submit(self.batch).wait()

    def plain(self) -> None:
        device, pipeline, buffers = self.device, self.pipeline, [self.x, self.y]
        for params in self.params:
            device.dispatch(pipeline, buffers, N // 256, params)
        device.synchronize()

    def check(self) -> None:
        for run in (self.submit, self.plain):
            self.device.write(self.y, np.zeros(N, np.float32))
            run()
            expected = np.float32(scale(self.count - 1)) * self.data + 1
            np.testing.assert_array_equal(self.device.download(self.y), expected)

    def close(self) -> None:
        self.batch.close()
        self.x.close()
        self.y.close()


def vulkan_twin(cuda: Any) -> tuple[Any, str]:
    """(the Vulkan device that is the same GPU as `cuda` with export_memory, or None; why not)."""
    from ironaccel.registry import registry

    if "import_memory" not in cuda.features:
        return None, "the CUDA device lacks import_memory"
    probe = registry.probe("vulkan")
    if not probe.available:
        return None, f"vulkan unavailable: {probe.reason}"
    want = cuda.uuid.removeprefix("GPU-").replace("-", "")
    for desc in registry.backend("vulkan").devices():
        if desc.extras.get("device_uuid") == want:
            vk = registry.open("vulkan", desc.ordinal)
            if "export_memory" in vk.features:
                return vk, ""
            vk.close()
            return None, f"vulkan:{desc.ordinal} lacks export_memory"
    return None, f"no Vulkan device is the same GPU as cuda:{cuda.ordinal}"


class Handover:
    """Vulkan's buffer as a CUDA buffer: imported without a copy, or downloaded and uploaded."""

    def __init__(self, cuda: Any, vk: Any, mib: int):
        self.cuda, self.vk = cuda, vk
        self.n = (mib << 20) // 4
        self.data = np.random.default_rng(5).standard_normal(self.n).astype(np.float32)
        self.source = vk.alloc(self.n, "float32", exportable=True)
        vk.write(self.source, self.data)
        vk.synchronize()

    def zero_copy(self) -> Any:
        with self.vk.export_memory(self.source) as ext:
            return self.cuda.import_memory(ext, self.n, "float32")

    def roundtrip(self) -> Any:
        return self.cuda.upload(self.vk.download(self.source))

    def once(self, make: Any) -> None:
        make().close()

    def check(self) -> None:
        for make in (self.zero_copy, self.roundtrip):
            buf = make()
            np.testing.assert_array_equal(self.cuda.download(buf), self.data)
            buf.close()

    def close(self) -> None:
        self.source.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--dispatches", type=int, default=100)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--json", default=None)
    parser.add_argument("--baseline", action="store_true", help="overwrite this bench's section of BASELINE.md")
    args = parser.parse_args()
    from ironaccel.registry import registry

    cases = []
    facts: dict[str, Any] = {"dispatches": args.dispatches, "handover_mib": args.mib}
    with registry.open("cuda", 0) as cuda:
        ours = Batches(cuda, args.dispatches)
        cases.append(compare(f"batch_vs_plain ({args.dispatches} dispatches)",
                             Case(run=repeat(ours.submit), check=ours.check, close=ours.close),
                             Case(run=repeat(ours.plain)), rounds=args.pairs, target=1.0))
        vk, why = vulkan_twin(cuda)
        if vk is None:
            facts["handover"] = f"not run: {why}"
            print(f"handover_vs_roundtrip not run: {why}", flush=True)
        else:
            with vk:
                hand = Handover(cuda, vk, args.mib)
                cases.append(compare(f"handover_vs_roundtrip ({args.mib} MiB Vulkan -> CUDA)",
                                     Case(run=repeat(lambda: hand.once(hand.zero_copy)), check=hand.check,
                                          close=hand.close),
                                     Case(run=repeat(lambda: hand.once(hand.roundtrip))),
                                     rounds=args.pairs, target=0.1))
        device = cuda.name
    doc = report("cuda", device, "plain dispatches; download + upload", facts, cases)
    publish(doc, args.json, Path(__file__).with_name("BASELINE.md") if args.baseline else None)


if __name__ == "__main__":
    main()
