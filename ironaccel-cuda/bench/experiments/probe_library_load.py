"""When does settling a library kernel's lazy load end the slow waits it leaves?  One fresh process per way.

    python3 ironaccel-cuda/bench/experiments/probe_library_load.py

A Library's kernel (cuLibraryGetKernel) loads into a context at its first launch, and from then on an idle
stream's query costs ~1.6 µs instead of ~0.4 µs.  Settling right after that launch (module.settle_lazy_load:
an event of a private idle stream, waited for) did not end it (bench/experiments/ab_settle.py), although
the same settle after cuModuleGetFunction does.  Each way below runs in its own process: get the kernel, launch
it once, do the way, sync the stream, then time the idle query.  Found (H200, two processes a way):
only cuCtxSynchronize ends it (205-217 ns); every settle, before or after the launch, leaves 1.37-1.76 us.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from probe_idle_sync import per_call

SOURCE = r'extern "C" __global__ void touch(int* p) { if (p) p[threadIdx.x] = 1; }'
WAYS = {
    "nothing": "",
    "settle at once after the launch (main's way)": "settle",
    "sync the stream, then settle": "sync settle",
    "sleep 2 ms, then settle": "sleep settle",
    "cuKernelGetFunction in the primary context + settle, before the launch": "getfunc-before",
    "settle, launch again, settle": "settle launch settle",
    "cuCtxSynchronize": "ctxsync",
    "sync, then an event on the stream + cuEventSynchronize": "sync event",
}


def child(way: str) -> None:
    import numpy as np

    import ironaccel_cuda as ia
    from ironaccel_cuda import _core, module

    dev = ia.Device(0)
    stream = dev.create_stream()
    h = int(stream._h)

    def query(k: int) -> None:
        for _ in range(k):
            _core.stream_query(h)

    d = module.driver()
    ctx = dev._state.ctx
    lib = ia.Library(ia.Program(SOURCE).compile())
    fn = lib.function("touch", dev)
    time.sleep(0.005)
    after_get = per_call(query, 5000)
    steps = way.split()
    if steps[:1] == ["getfunc-before"]:
        err, _ = d.cuKernelGetFunction(fn._kernel)
        module.settle_lazy_load(ctx)
    fn.launch(1, 32, np.uint64(0), stream=stream)
    for step in steps:
        if step == "settle":
            module.settle_lazy_load(ctx)
        elif step == "sync":
            stream.synchronize()
        elif step == "sleep":
            time.sleep(0.002)
        elif step == "launch":
            fn.launch(1, 32, np.uint64(0), stream=stream)
        elif step == "ctxsync":
            d.cuCtxSynchronize()
        elif step == "event":
            e = dev.create_event()
            e.record(stream)
            e.synchronize()
    stream.synchronize()
    time.sleep(0.005)
    print(json.dumps({"after_get": after_get, "after": per_call(query, 5000)}))


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    print("| way, after the first launch | idle query after the get | after the launch and the way |\n"
          "|---|---:|---:|")
    for label, way in WAYS.items():
        for _ in range(2):
            out = subprocess.run([sys.executable, __file__, "--child", way], capture_output=True, text=True,
                                 timeout=60)
            try:
                r = json.loads(out.stdout.strip().splitlines()[-1])
                print(f"| {label} | {r['after_get']:,.0f} ns | {r['after']:,.0f} ns |", flush=True)
            except (IndexError, ValueError):
                print(f"| {label} | failed: {out.stderr.strip()[-300:]} | |", flush=True)


if __name__ == "__main__":
    main()
