#!/usr/bin/env python3
"""Run every code block of the READMEs and guides, so the documentation cannot drift from the code.

    python .ci/snippets.py                 # run what this machine can; list what needs another
    python .ci/snippets.py --list          # every block: file:line, language, what it needs
    IRONACCEL_REQUIRE=cuda python .ci/snippets.py    # the H200 run: a block needing cuda must run, not skip

Files: README.md, the READMEs of every distribution and bench folder, examples/README.md and
docs/guides/*.md.  Each fenced block is handled by its info string:

- ``python``: run in a fresh interpreter (this one), from the repository root, 300 s at most.  A block
  marked ``<!-- snippet: continue -->`` runs in one process with the python blocks before it in that file.
- ``toml``: parsed; ``glsl``: compiled by glslangValidator when installed.
- ``bash`` / ``sh``: run only when marked ``<!-- snippet: run -->``; any other must say why not with
  ``<!-- snippet: skip REASON -->`` (installs, CI itself, the GPU machine's own commands).
- ``text`` (output, tables, pseudo-code): nothing to run.  A block without an info string is an error.

What a block needs: the line just above it may say ``<!-- snippet: needs cuda,nccl -->`` (backend names),
and a distribution's README needs its own backend by default (ironaccel-cuda/README.md: cuda).  A block whose
backend is not usable here is skipped and listed, unless IRONACCEL_REQUIRE names the backend (then it fails).
``<!-- snippet: skip REASON -->`` leaves any block out, with the reason printed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 300
MARK = re.compile(r"<!--\s*snippet:\s*(\w+)\s*(.*?)\s*-->")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


@dataclass
class Block:
    path: Path
    line: int
    lang: str
    code: str
    mark: str = ""  # run | skip | continue | needs
    arg: str = ""
    needs: tuple[str, ...] = ()
    chain: list[Block] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def files() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "examples" / "README.md", ROOT / "bench" / "README.md"]
    found += sorted(ROOT.glob("ironaccel-*/README.md")) + sorted(ROOT.glob("ironaccel-*/bench/README.md"))
    found += sorted((ROOT / "docs" / "guides").glob("*.md"))
    return [p for p in found if p.is_file()]


GUIDE_NEEDS = {"cuda-memory.md": ("cuda",), "cuda-streams-graphs.md": ("cuda",), "nccl.md": ("cuda",),
               "compat.md": ("cuda",), "performance.md": ("cuda",)}
#: backends.toml's extensions (slang, cuda-compat): distributions without a backend of their own to probe.
EXTENSIONS = frozenset(tomllib.loads((ROOT / "backends.toml").read_text(encoding="utf-8")).get("extensions", {}))


def default_needs(path: Path) -> tuple[str, ...]:
    """A distribution's README needs its backend (core's needs nothing); the CUDA guides need cuda."""
    rel = path.relative_to(ROOT).parts
    if rel[:2] == ("docs", "guides"):
        return GUIDE_NEEDS.get(rel[2], ())
    if rel[0].startswith("ironaccel-") and rel[0] != "ironaccel-core":
        return (rel[0].removeprefix("ironaccel-"),)
    return ()


def blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        start = i
        body = []
        i += 1
        while i < len(lines) and not re.match(rf"^{re.escape(indent)}```\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        block = Block(path, start + 1, lang.lower(), "\n".join(body) + "\n", needs=default_needs(path))
        prev = lines[start - 1].strip() if start else ""
        mark = MARK.fullmatch(prev)
        if mark:
            block.mark, block.arg = mark.group(1), mark.group(2)
            if block.mark == "needs":
                block.needs = tuple(n.strip() for n in block.arg.split(",") if n.strip())
        out.append(block)
    return out


def required() -> set[str]:
    value = os.environ.get("IRONACCEL_REQUIRE", "")
    return {n.strip() for n in value.split(",") if n.strip()}


_usable: dict[str, bool] = {}


def _extension_usable(name: str) -> bool:
    """An extension of backends.toml (no backend of its own to probe): slang where its compiler is found, the
    CUDA compat where CUDA is usable."""
    if name == "slang":
        from ironaccel_slang import find_slangc

        return find_slangc() is not None
    if name == "cuda-compat":
        import ironaccel_cuda_compat  # noqa: F401

        return usable("cuda")
    raise LookupError(name)


def usable(backend: str) -> bool:
    if backend not in _usable:
        import ironaccel

        try:
            _usable[backend] = _extension_usable(backend) if backend in EXTENSIONS else \
                ironaccel.probe(backend).available
        except Exception:  # an unknown name, a broken plugin, an extension not installed: not usable here
            _usable[backend] = False
    return _usable[backend]


def run_python(code: str) -> tuple[bool, str]:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    try:
        done = subprocess.run([sys.executable, f.name], cwd=ROOT, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"ran past {TIMEOUT_S} s"
    finally:
        os.unlink(f.name)
    return done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def run_bash(code: str) -> tuple[bool, str]:
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=ROOT, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"ran past {TIMEOUT_S} s"
    return done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def check(block: Block, session: list[str]) -> tuple[str, str]:
    """('ran' | 'skipped' | 'failed' | 'none', detail) for one block; `session` is the file's python so far."""
    if block.mark == "skip":
        return "skipped", f"marked: {block.arg or 'no reason given'}"
    if block.lang == "":
        return "failed", "a code block needs an info string (text for output)"
    if block.lang in ("text", "console", "output", "mermaid"):
        return "none", ""
    missing = [b for b in block.needs if not usable(b)]
    if missing:
        if set(missing) & required():
            return "failed", f"needs {', '.join(missing)}, required here (IRONACCEL_REQUIRE) but not usable"
        return "skipped", f"needs {', '.join(missing)} (not usable here)"
    if block.lang == "python":
        code = "".join(session) + block.code if block.mark == "continue" else block.code
        ok, log = run_python(code)
        return ("ran", "") if ok else ("failed", log)
    if block.lang == "toml":
        try:
            tomllib.loads(block.code)
        except tomllib.TOMLDecodeError as exc:
            return "failed", str(exc)
        return "ran", ""
    if block.lang == "glsl":
        tool = shutil.which("glslangValidator")
        if tool is None:
            return "skipped", "needs glslangValidator"
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "k.comp"
            src.write_text(block.code)
            done = subprocess.run([tool, "-V", str(src), "-o", str(Path(tmp) / "k.spv")], capture_output=True,
                                  text=True)
        return ("ran", "") if done.returncode == 0 else ("failed", done.stdout + done.stderr)
    if block.lang in ("bash", "sh", "shell"):
        if block.mark != "run":
            return "failed", "a shell block must be marked <!-- snippet: run --> or <!-- snippet: skip REASON -->"
        ok, log = run_bash(block.code)
        return ("ran", "") if ok else ("failed", log)
    return "failed", f"no rule for {block.lang!r} blocks (mark it skip with a reason, or use text)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="list every block and what it needs; run nothing")
    parser.add_argument("paths", nargs="*", type=Path, help="only these files")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.paths] or files()
    counts = {"ran": 0, "skipped": 0, "failed": 0, "none": 0}
    for path in paths:
        session: list[str] = []
        for block in blocks(path):
            if args.list:
                print(f"{block.where} {block.lang or '-'} {block.mark or ''} {block.arg} "
                      f"needs={','.join(block.needs) or '-'}")
                continue
            verdict, detail = check(block, session)
            counts[verdict] += 1
            if block.lang == "python" and verdict == "ran":
                session.append(block.code)
            if verdict == "skipped":
                print(f"skip {block.where}: {detail}")
            elif verdict == "failed":
                print(f"FAIL {block.where} ({block.lang or 'no info string'}):\n{detail.rstrip()}\n")
    if not args.list:
        print(f"snippets: {counts['ran']} ran, {counts['skipped']} skipped, {counts['failed']} failed, "
              f"{counts['none']} text blocks, in {len(paths)} files")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
