"""The fake-library builder of the testing kit: builds with -Werror, says why it cannot, loads what it built."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from ironaccel.testing import cbuild


def test_a_shared_library_builds_against_a_header_and_loads(tmp_path: Path) -> None:
    header = tmp_path / "inc" / "answer.h"
    header.parent.mkdir()
    header.write_text("int answer(int);\n")
    source = tmp_path / "answer.c"
    source.write_text('#include "answer.h"\nint answer(int x) { return x + ANSWER; }\n')
    lib = cbuild.shared_library([source], tmp_path / "libanswer.so", headers=[header], flags=["-DANSWER=41"])
    assert ctypes.CDLL(str(lib)).answer(1) == 42


def test_warnings_are_errors_and_the_log_is_kept(tmp_path: Path) -> None:
    source = tmp_path / "warn.c"
    source.write_text("int f(void) { int unused; return 0; }\n")
    with pytest.raises(cbuild.BuildError, match="unused"):
        cbuild.shared_library([source], tmp_path / "libwarn.so")


def test_a_missing_header_skips_with_the_reason(tmp_path: Path) -> None:
    assert cbuild.missing([tmp_path / "nope.h"]) == f"needs the header {tmp_path / 'nope.h'}"
    with pytest.raises(pytest.skip.Exception, match="nope.h"):
        cbuild.executable([tmp_path / "x.c"], tmp_path / "x", headers=[tmp_path / "nope.h"])


def test_no_compiler_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cbuild.shutil, "which", lambda name: None)
    assert cbuild.compiler() is None
    assert cbuild.missing() == "needs a C compiler (cc or gcc, or $CC)"
