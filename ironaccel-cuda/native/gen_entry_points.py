"""Writes `_entry_points.pxi`, the Cython declarations of the driver table, from `entry_points.h`.

setup.py runs it before Cython, so the table in entry_points.h is the only place an entry point is written
down; `python gen_entry_points.py --check` fails when the generated file is stale (CI).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADER = HERE / "entry_points.h"
OUTPUT = HERE / "_entry_points.pxi"
_ENTRY = re.compile(r"X\(\s*(\w+)\s*,\s*(\d+)\s*,\s*(CALL|RELEASE)\s*,\s*\(([^()]*)\)\s*\)")


def entries(text: str) -> list[tuple[str, int, str, str]]:
    """(name, abi, kind, parameters) of every X(...) line of the table, in order."""
    joined = re.sub(r"\\\s*\n", " ", text)
    found = [(m[1], int(m[2]), m[3], " ".join(m[4].split())) for m in _ENTRY.finditer(joined)]
    if not found:
        raise SystemExit(f"{HEADER}: no X(...) entries found")
    return found


def render(found: list[tuple[str, int, str, str]]) -> str:
    lines = [
        "# Generated from entry_points.h by gen_entry_points.py; do not edit.",
        'cdef extern from "driver.h" nogil:',
    ]
    for name, _abi, _kind, params in found:
        lines.append(f'    CUresult {name} "ia_cu.{name}" ({params})')
    lines.append("    enum:")
    lines += [f"        IA_{name}" for name, *_ in found]
    lines.append("        IA_N_ENTRY_POINTS")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = render(entries(HEADER.read_text()))
    if "--check" in argv:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.name} is stale: run python {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    if not OUTPUT.exists() or OUTPUT.read_text() != text:
        OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
