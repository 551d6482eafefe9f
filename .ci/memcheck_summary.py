"""Group compute-sanitizer's leak reports by the driver call and the Python frames that made each allocation.

    python3 .ci/memcheck_summary.py memcheck.txt

memcheck prints one backtrace per leaked allocation; hundreds of them are unreadable, and what matters is which
test (and which line of the library) allocated them.  Prints one line per group, largest first.
"""

from __future__ import annotations

import collections
import re
import sys


def groups(lines: list[str]) -> collections.Counter[tuple[str, str]]:
    found: collections.Counter[tuple[str, str]] = collections.Counter()
    i = 0
    while i < len(lines):
        if not re.search(r"Leaked [\d,]+ bytes at 0x", lines[i]):
            i += 1
            continue
        api, frames, i = "", [], i + 1
        while i < len(lines) and ("Host Frame" in lines[i] or "Saved host" in lines[i]):
            native = re.search(r"Host Frame: (cu\w+) \[", lines[i])
            if native and not api:
                api = native.group(1)
            py = re.search(r"Host Frame: (\S+) in (\S+\.py):(\d+)", lines[i])
            if py:
                frames.append(f"{py.group(1)} {py.group(2)}:{py.group(3)}")
            i += 1
        found[(api or "?", " < ".join(frames[:5]))] += 1
    return found


def main() -> None:
    lines = open(sys.argv[1], errors="replace").read().splitlines()
    found = groups(lines)
    print(f"{sum(found.values())} leaked allocations printed, in {len(found)} groups")
    for (api, frames), n in found.most_common():
        print(f"{n:5d}  {api:22s} {frames}")


if __name__ == "__main__":
    main()
