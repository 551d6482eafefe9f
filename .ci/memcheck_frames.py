"""Does compute-sanitizer keep the Python frames of an allocation's backtrace alive (and their locals with them)?

    python3 .ci/memcheck_frames.py                                    # False: the holder is freed
    compute-sanitizer --tool memcheck --leak-check full python3 .ci/memcheck_frames.py   # True: a frame holds it
    compute-sanitizer --tool memcheck --show-backtrace no --leak-check full python3 .ci/memcheck_frames.py

On the H200 (compute-sanitizer 2025.3.1) the second printed True and reported the 16 bytes as leaked;
the third printed False with no leak.  This is why `.ci/h200 memcheck` runs with `--show-backtrace no`.
"""
import gc
import weakref

import numpy as np

import ironaccel_cuda as cu

d = cu.Device(0)


class Holder:
    pass


def make() -> weakref.ref[Holder]:
    h = Holder()
    h.buf = d.upload(np.ones(4, np.float32))  # compute.upload is Python: its frame is in the allocation's backtrace
    return weakref.ref(h)


w = make()
gc.collect()
held = w()
print("holder kept alive after its frame returned:", held is not None,
      [type(r).__name__ for r in gc.get_referrers(held)] if held is not None else "")
