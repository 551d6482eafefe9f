"""The one probe pattern (ProbedBackend, ProbeFacts), check_ordinal and loaded_library."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from ironaccel import BackendRegistry, InvalidArgument, NotAvailable, ProbeResult
from ironaccel.probing import ProbedBackend, ProbeFacts, check_ordinal, loaded_library


class Steps(ProbedBackend[list[str]]):
    name = "steps"

    def __init__(self, fail_at: str | None = None):
        super().__init__()
        self.fail_at = fail_at
        self.runs = 0

    def _probe(self, facts: ProbeFacts) -> list[str]:
        self.runs += 1
        facts.record(library_path="/opt/steps/libsteps.so", runtime_version="2.1")
        facts.extra(board="rev b")
        if self.fail_at == "devices":
            raise NotAvailable("steps", "the runtime loaded but found no board", fix="plug one in", code=7,
                               code_name="NO_BOARD")
        facts.record(driver_version="530")
        facts.found("2 boards", 2)
        return ["board 0", "board 1"]

    def devices(self) -> list[str]:
        return list(self._state())


def test_facts_recorded_before_a_failing_step_stay_in_the_result():
    result = Steps(fail_at="devices").probe()
    assert not result.available and result.reason == "the runtime loaded but found no board"
    assert (result.fix, result.code, result.code_name) == ("plug one in", 7, "NO_BOARD")
    assert result.library_path == "/opt/steps/libsteps.so" and result.runtime_version == "2.1"
    assert result.driver_version is None and result.extras["board"] == "rev b"
    with pytest.raises(NotAvailable, match="found no board"):
        Steps(fail_at="devices").devices()


def test_state_is_computed_once_per_probe_and_refresh_forgets_it():
    backend = Steps()
    result = backend.probe()
    assert result.available and (result.reason, result.device_count, result.driver_version) == ("2 boards", 2, "530")
    assert backend.devices() == ["board 0", "board 1"] and backend.runs == 1
    backend.refresh()
    assert backend.devices() and backend.runs == 2  # devices() probes when nothing has
    assert backend.devices() and backend.runs == 2


def test_the_registry_is_the_cache_and_its_refresh_reaches_the_backend():
    from ironaccel import BackendSpec, hookimpl

    backend = Steps()

    class Plugin:
        @hookimpl
        def ironaccel_backends(self):
            return [BackendSpec("steps", factory=lambda: backend)]

    reg = BackendRegistry(discover=False)
    reg.register(Plugin())
    first = reg.probe("steps")
    assert reg.probe("steps") is first and reg.devices("steps") and backend.runs == 1
    reg.refresh("steps")
    assert reg.devices("steps") and backend.runs == 2


def test_a_probe_must_say_what_it_found():
    class Silent(Steps):
        def _probe(self, facts: ProbeFacts) -> list[str]:
            return []

    with pytest.raises(TypeError, match="facts.found"):
        Silent().probe()
    with pytest.raises(TypeError, match="not probe facts"):
        ProbeFacts("x").record(device_count="3")
    assert isinstance(ProbeFacts("x").unavailable(NotAvailable("x", "no")), ProbeResult)


@pytest.mark.parametrize("ordinal, message", [
    ("0", "the ordinal must be an int, got str '0'"),
    (1.0, "the ordinal must be an int, got float 1.0"),
    (True, "the ordinal must be an int, got bool True"),
    (None, "the ordinal must be an int, got NoneType None"),
    (2, "ordinal 2 is out of range: the valid ordinals are 0..1"),
    (-1, "ordinal -1 is out of range: the valid ordinals are 0..1"),
])
def test_check_ordinal_says_what_is_wrong(ordinal, message):
    with pytest.raises(InvalidArgument) as info:
        check_ordinal("steps", ordinal, 2)
    assert info.value.op == "open" and info.value.detail == message


def test_check_ordinal_accepts_ints_of_any_kind():
    assert check_ordinal("steps", 1, 2) == 1
    assert check_ordinal("steps", np.int64(1), 2) == 1
    with pytest.raises(InvalidArgument, match="there is no device"):
        check_ordinal("steps", 0, 0)


def test_loaded_library_finds_a_loaded_file():
    ctypes.CDLL("libm.so.6")
    path = loaded_library("libm.so")
    assert path and path.startswith("/") and "libm.so" in path
    assert loaded_library("libno-such-library") is None


def test_load_library_wants_the_symbols_it_is_told(tmp_path, monkeypatch):
    """A library that loads but lacks a symbol is not the one: NotAvailable names what it lacks."""
    from ironaccel.probing import load_library

    libc = loaded_library("libc.so")
    assert libc
    monkeypatch.delenv("IRONACCEL_TEST_LIB", raising=False)
    found = load_library("steps", [libc], symbols=("malloc", "free"))
    assert found.path == libc and hasattr(found.handle, "malloc")
    with pytest.raises(NotAvailable) as info:
        load_library("steps", [libc], symbols=("malloc", "zeInit"))
    assert "does not export zeInit" in info.value.reason and libc in info.value.reason


def test_load_library_takes_the_file_named_by_its_variable_or_nothing(tmp_path, monkeypatch):
    """A file named by the variable that fails to load (or lacks a symbol) is the answer: once the search went on
    and quietly loaded a library found elsewhere."""
    from ironaccel.probing import load_library

    libc = loaded_library("libc.so")
    assert libc
    broken = tmp_path / "libbroken.so"
    broken.write_bytes(b"not an ELF file")
    monkeypatch.setenv("IRONACCEL_TEST_LIB", str(broken))
    with pytest.raises(NotAvailable) as info:
        load_library("steps", ["libc.so.6"], env_var="IRONACCEL_TEST_LIB")
    assert info.value.reason.startswith(f"IRONACCEL_TEST_LIB={broken} cannot be used")
    assert list(info.value.searched) == [str(broken)]
    monkeypatch.setenv("IRONACCEL_TEST_LIB", libc)
    with pytest.raises(NotAvailable, match="does not export zeInit"):
        load_library("steps", ["libc.so.6"], env_var="IRONACCEL_TEST_LIB", symbols=("zeInit",))
    assert load_library("steps", ["libc.so.6"], env_var="IRONACCEL_TEST_LIB").path == libc
