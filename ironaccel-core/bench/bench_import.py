"""Import and survey cost (issue targets; a benchmark, not a test).

    python ironaccel-core/bench/bench_import.py [--runs 21]

* `import ironaccel` with every distribution installed, against `import pluggy, numpy`:
  median of interleaved fresh-process starts; target at most 30 ms more.
* No vendor library is mapped after `import ironaccel` and listing backends.
* A full survey (every backend, devices too): target under 2 s.
* A survey that does not ask for PJRT maps no PJRT plugin.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

VENDOR_LIBS = ("libcuda", "libvulkan", "libamdhip", "libze_loader", "pjrt", "xla_", "libEGL", "libnrt", "libQnn")


def wall_ms(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return (time.perf_counter() - start) * 1000


def child(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


MAPPED = f"[l for l in open('/proc/self/maps').read().split() if any(v in l for v in {VENDOR_LIBS!r})]"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()

    base, full = [], []
    for _ in range(args.runs):  # interleaved, so drift hits both sides alike
        base.append(wall_ms("import pluggy, numpy"))
        full.append(wall_ms("import pluggy, numpy, ironaccel"))
    extra = statistics.median(full) - statistics.median(base)

    lazy = child(
        "import json, ironaccel; n = ironaccel.names(); ironaccel.registry.installed(); "
        f"print(json.dumps({{'backends': n, 'mapped': sorted(set({MAPPED}))}}))"
    )
    survey = child(
        "import json, time, ironaccel; t = time.perf_counter(); r = ironaccel.survey(); "
        "print(json.dumps({'s': time.perf_counter() - t, "
        "'available': [x.name for x in r if x.probe.available], 'devices': sum(len(x.devices) for x in r)}))"
    )
    no_pjrt = child(
        "import json, ironaccel; ironaccel.survey([n for n in ironaccel.names() if n != 'pjrt']); "
        f"print(json.dumps({{'mapped': sorted(set(l for l in {MAPPED} if 'pjrt' in l or 'xla' in l))}}))"
    )
    rows = [
        ("backends installed", len(lazy["backends"]), ""),
        ("import pluggy, numpy (median ms)", round(statistics.median(base), 1), ""),
        ("import pluggy, numpy, ironaccel (median ms)", round(statistics.median(full), 1), ""),
        ("extra cost of ironaccel (ms)", round(extra, 1), "PASS" if extra <= 30 else "FAIL (target <= 30)"),
        ("vendor libraries mapped after import + listing", len(lazy["mapped"]), "PASS" if not lazy["mapped"] else
         f"FAIL {lazy['mapped']}"),
        ("full survey (s)", round(survey["s"], 3), "PASS" if survey["s"] < 2 else "FAIL (target < 2 s)"),
        ("available backends / devices", f"{','.join(survey['available'])} / {survey['devices']}", ""),
        ("PJRT plugins mapped by a survey without pjrt", len(no_pjrt["mapped"]), "PASS" if not no_pjrt["mapped"] else
         f"FAIL {no_pjrt['mapped']}"),
    ]
    print("| measure | value | target |\n|---|---|---|")
    for name, value, verdict in rows:
        print(f"| {name} | {value} | {verdict} |")


if __name__ == "__main__":
    main()
