"""ironaccel against a peer doing the same work directly (pyvulkan, wgpu-py, moderngl, JAX): the two sides as
harness Cases sampled together, and the one report shape every cross-vendor bench writes (a table, JSON).

The statistic is, per round, ironaccel's time per operation over the direct side's (below 1: ironaccel is
faster), reported as its median with a bootstrap 95% interval.  A target is a most: "ironaccel / direct <=
target".  It is met when the whole interval is below the target (its upper bound is), missed when the whole
interval is above, unclear when the interval holds the target: `harness.verdict`'s rule, read the other way
round, since verdict's ratios are better higher and a time ratio is better lower.

The benches run as scripts (`python3 ironaccel-vulkan/bench/bench_dispatch.py`), so each finds this folder
through its own path: `sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))`.
"""

from __future__ import annotations

import json
import math
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import Case, Clock, Interval, Samples, SamplingConfig, measure_rounds, verdict

IRONACCEL, DIRECT = "ironaccel", "direct"
RATIO = "ironaccel time / direct time per operation, median of per-round ratios (below 1: ironaccel faster)"
RULE = "met: the whole 95% interval is below the target; missed: wholly above it; unclear: it holds the target"

# verdict(interval, t) says 'win' when the whole interval is above t, 'loss' when wholly below: for a time ratio
# ironaccel / direct that is ironaccel slower / faster.
_TARGET_WORDS = {"loss": "met", "parity": "unclear", "win": "missed"}
_VS_DIRECT_WORDS = {"loss": "faster", "parity": "parity", "win": "slower"}


def target_verdict(interval: Interval, target: float) -> str:
    """'met', 'unclear' or 'missed' for the target "ironaccel / direct <= target" (see the module's docstring)."""
    return _TARGET_WORDS[verdict(interval, target)]


def vs_direct(interval: Interval) -> str:
    """'faster', 'parity' or 'slower': ironaccel against the direct side, the whole interval clear of 1.0 or not."""
    return _VS_DIRECT_WORDS[verdict(interval, 1.0)]


def repeat(op: Callable[[], object]) -> Callable[[int], None]:
    """A Case's `run`: `op` n times, timed by the harness as one batch."""

    def run(n: int) -> None:
        for _ in range(n):
            op()

    return run


def sampling(rounds: int) -> SamplingConfig:
    """Exactly `rounds` rounds (what the benches' --pairs flags ask for), no time cap; batches of about 2 ms."""
    return SamplingConfig(rounds=rounds, min_rounds=rounds, max_seconds=math.inf)


def row(name: str, samples: Samples, target: float, config: SamplingConfig) -> dict[str, Any]:
    """One case of the report, from its samples (labels IRONACCEL and DIRECT)."""
    ratio = samples.ratio([IRONACCEL], [DIRECT], resamples=config.bootstrap, seed=config.seed)
    return {
        "case": name,
        "ironaccel_us": samples.median_ns(IRONACCEL) / 1e3,
        "direct_us": samples.median_ns(DIRECT) / 1e3,
        "ratio": ratio.to_json(),
        "rounds": int(samples.per_op_ns.shape[0]),
        "batch": dict(zip(samples.labels, samples.batch)),
        "target": target,
        "verdict": target_verdict(ratio, target),
        "vs_direct": vs_direct(ratio),
    }


def compare(name: str, ours: Case, direct: Case, *, rounds: int, target: float,
            clock: Clock = time.perf_counter_ns) -> dict[str, Any]:
    """Check both sides once (a failing check raises: nothing wrong gets timed), sample them together for
    `rounds` rounds, close them; the case's row of the report."""
    config = sampling(rounds)
    try:
        for case in (ours, direct):
            if case.check is not None:
                case.check()
        samples = measure_rounds([(IRONACCEL, ours), (DIRECT, direct)], config, clock)
    finally:
        for case in (ours, direct):
            if case.close is not None:
                case.close()
    result = row(name, samples, target, config)
    print(f"{name}: {result['ratio']['median']:.3f} ({result['verdict']})", flush=True)  # progress: 64 MiB is slow
    return result


def report(backend: str, device: str, peer: str, facts: dict[str, Any], cases: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON document of one bench run: the same keys for every backend; `facts` holds its own details."""
    return {
        "backend": backend,
        "device": device,
        "peer": peer,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(),
        "python": platform.python_version(),
        "facts": facts,
        "ratio": RATIO,
        "rule": RULE,
        "cases": cases,
    }


def markdown(doc: dict[str, Any]) -> str:
    """The report as a heading, its scalar facts and a table, one row per case."""
    facts = ", ".join(f"{k} {v}" for k, v in doc["facts"].items() if isinstance(v, str | int | float))
    lines = [
        f"{doc['backend']} on {doc['device']}, ironaccel against {doc['peer']} ({doc['date']}, {doc['host']})",
        *([facts] if facts else []),
        f"ratio: {doc['ratio']}, with its bootstrap 95% interval",
        f'verdict on "ironaccel / direct <= target": {doc["rule"]}',
        "",
        "| case | ironaccel us | direct us | ironaccel / direct [95% CI] | rounds | target | verdict | vs direct |",
        "|---|---:|---:|---|---:|---|---|---|",
    ]
    for case in doc["cases"]:
        r = case["ratio"]
        lines.append(f"| {case['case']} | {case['ironaccel_us']:,.1f} | {case['direct_us']:,.1f} | "
                     f"{r['median']:.3f} [{r['low']:.3f}, {r['high']:.3f}] | {case['rounds']} | "
                     f"<= {case['target']:g} | {case['verdict']} | {case['vs_direct']} |")
    return "\n".join(lines) + "\n"


def publish(doc: dict[str, Any], json_path: str | Path | None, baseline: str | Path | None = None) -> None:
    """Print the table; write the JSON too when asked, and overwrite the backend's BASELINE.md when given one."""
    text = markdown(doc)
    print(text, end="", flush=True)
    if json_path:
        Path(json_path).write_text(json.dumps(doc, indent=2) + "\n")
    if baseline:
        write_baseline(Path(baseline), text, machine=f"{doc['device']} on {doc['host']} (Python {doc['python']})")


def git_commit(where: Path) -> str:
    """The commit the tree at `where` is on (with `+dirty` when it has changes), or `unknown` outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def write_baseline(path: Path, table: str, *, machine: str, command: list[str] | None = None,
                   section: str | None = None) -> None:
    """Overwrite this benchmark's section of `path` (a backend's bench/BASELINE.md) with the latest figures.

    One file per backend; each benchmark script owns one section of it (between `<!-- bench: NAME -->`
    markers; `section` names another, for a script run once per backend into one file), replaced by every
    measured run of that script, so the repository holds the latest figures and git history the older ones
    (no dated result folders).  Text outside the markers is kept."""
    argv = command if command is not None else sys.argv
    name = section or (Path(argv[0]).name if argv else "bench")
    begin, end = f"<!-- bench: {name} -->", f"<!-- end bench: {name} -->"
    section = "\n".join([
        begin,
        f"## `{name}`",
        "",
        f"- command: `python {shlex.join(argv)}`",
        f"- machine: {machine}",
        f"- commit: {git_commit(path.parent)}",
        "",
        table.rstrip("\n"),
        end,
    ])
    old = path.read_text() if path.exists() else ""
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        text = head + section + rest.split(end, 1)[1]
    else:
        if not old.strip() or (old.startswith("# Benchmark baseline") and "<!-- bench:" not in old):
            old = ("# Benchmark baseline\n\nThe latest measured run of each benchmark, overwritten by each one "
                   "(older figures: `git log -p` of this file).\n")
        text = old.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)
