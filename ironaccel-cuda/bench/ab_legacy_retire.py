"""A/B of the compiled core's legacy-stream query before a wait (`_core.legacy_retire`), on and off.

    python3 ironaccel-cuda/bench/ab_legacy_retire.py [--json OUT]

Work queued on the legacy stream that the driver has not seen finish makes every later query or wait on any
stream of the context about 1.3 us slower, until something waits on the legacy stream
(`probe_idle_sync.py --remedies`).  With `legacy_retire` on, a wait of ours after work of ours went to the
legacy stream queries the legacy stream once first, which ends that state when the work is done.  That query
is a cost of its own, so this measures the patterns where it pays and where it might not:

- ``htod+launch+sync``: per iteration a 1 KiB pageable copy on the legacy stream, a launch on a non-blocking
  stream, that stream's synchronize (the copy is often not done yet when the query runs);
- ``htod, 8 syncs``: one legacy copy, then 8 synchronizes of an idle non-blocking stream;
- ``htod, 4 event cycles``: one legacy copy, then 4 event record + synchronize on the non-blocking stream;
- ``legacy launch+event``: PyCUDA's default-stream style, launch and event record on the legacy stream, then
  the event's synchronize (the event covers the launch: no extra query);
- ``idle syncs``: synchronizes of an idle non-blocking stream, nothing on the legacy stream (the flag check
  alone).

Cases are sampled together in balanced rounds (`harness.measure_rounds`); the ratio is off time over on time
(above 1: the query pays).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import Case, SamplingConfig, measure_rounds  # noqa: E402

SOURCE = r'extern "C" __global__ void touch(int* p) { if (p) p[threadIdx.x] = 1; }'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import ironaccel_cuda as ia
    from ironaccel_cuda import _core

    dev = ia.Device(0)
    dev._bind_here()
    stream = dev.create_stream()
    h = stream._h
    fn = dev.load_module(ia.Program(SOURCE).compile()).function("touch")
    dp = _core.mem_alloc(1024)
    host = np.ones(1024, np.uint8)
    ev = _core.event_create(2)  # timing off
    zero = np.uint64(0)
    _core.stream_sync(0)

    def htod_launch_sync(k: int) -> None:
        for _ in range(k):
            _core.memcpy_htod(dp, host, 1024, 0)
            fn.launch(1, 32, zero, stream=stream)
            _core.stream_sync(h)

    def htod_syncs(k: int) -> None:
        for _ in range(k):
            _core.memcpy_htod(dp, host, 1024, 0)
            for _ in range(8):
                _core.stream_sync(h)

    def htod_events(k: int) -> None:
        for _ in range(k):
            _core.memcpy_htod(dp, host, 1024, 0)
            for _ in range(4):
                _core.event_record(ev, h)
                _core.event_sync(ev)

    def legacy_launch_event(k: int) -> None:
        for _ in range(k):
            fn.launch(1, 32, zero)  # no stream: the legacy stream
            _core.event_record(ev, 0)
            _core.event_sync(ev)

    def idle_syncs(k: int) -> None:
        for _ in range(k):
            _core.stream_sync(h)

    def side(body: Callable[[int], None], on: bool) -> Case:
        def run(k: int) -> None:
            _core.legacy_retire(on)
            body(k)
            _core.stream_sync(0)  # each batch leaves the legacy stream seen idle
        return Case(run)

    report: dict[str, object] = {"rows": []}
    print("| pattern | on ns | off ns | off / on [95% CI] |\n|---|---:|---:|---:|")
    for name, body in (("htod+launch+sync", htod_launch_sync), ("htod, 8 syncs", htod_syncs),
                       ("htod, 4 event cycles", htod_events), ("legacy launch+event", legacy_launch_event),
                       ("idle syncs", idle_syncs)):
        samples = measure_rounds([("on", side(body, True)), ("off", side(body, False))], SamplingConfig())
        ratio = samples.ratio(["off"], ["on"])
        row = {"pattern": name, "on": samples.median_ns("on"), "off": samples.median_ns("off"),
               "off_over_on": ratio.to_json()}
        report["rows"].append(row)  # type: ignore[attr-defined]
        print(f"| {name} | {row['on']:,.0f} | {row['off']:,.0f} | {ratio.median:.3f} [{ratio.low:.3f}, "
              f"{ratio.high:.3f}] |", flush=True)
    _core.legacy_retire(True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
