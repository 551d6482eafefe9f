"""What every first-party backend that is usable here shares through the probe pattern (issue 9).

For each installed backend whose probe passes on this machine: the registry is the only probe
cache (devices() reuses what the probe found, and registry.refresh() reaches the backend so the
next call probes again), and open() refuses an ordinal of the wrong type saying so.  Each backend
runs in a child process of its own, as on the H200 where one process cannot hold every driver.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ironaccel.registry import FIRST_PARTY

CHECKS = """
import sys
from ironaccel import BackendRegistry, InvalidArgument
from ironaccel.probing import ProbedBackend

name = sys.argv[1]
reg = BackendRegistry()
result = reg.probe(name)
if not result.available:
    print("unusable:", result.reason)
    raise SystemExit(0)
backend = reg.backend(name)
assert isinstance(backend, ProbedBackend), type(backend)
runs = []
steps = type(backend)._probe

def counting(self, facts):
    runs.append(1)
    return steps(self, facts)

type(backend)._probe = counting
reg.refresh(name)
assert reg.probe(name).available and reg.devices(name)
assert len(runs) == 1, runs  # probed once; devices() used what the probe found
assert reg.probe(name) is reg.probe(name)
reg.refresh(name)
assert reg.devices(name) and len(runs) == 2, runs
for bad, kind in (("0", "str"), (0.0, "float"), (True, "bool")):
    try:
        reg.open(name, bad)
    except InvalidArgument as exc:
        assert exc.op == "open" and exc.detail.startswith(f"the ordinal must be an int, got {kind}"), exc
    else:
        raise AssertionError(f"open({bad!r}) was accepted")
print("ok")
"""


@pytest.mark.parametrize("name", sorted(FIRST_PARTY))
def test_probe_pattern_and_ordinal_check(name: str) -> None:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(CHECKS), name], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.strip().splitlines()[-1]
    if out.startswith("unusable:"):
        pytest.skip(f"{name} is {out}")
    assert out == "ok"
