"""A private XDG_RUNTIME_DIR (wgpu-native and the GL/Vulkan loaders want one) and a private Slang cache folder."""

import os
import tempfile

import pytest

if not os.environ.get("XDG_RUNTIME_DIR") or not os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
    os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="ironaccel-xdg-")  # mkdtemp makes it mode 700


@pytest.fixture
def slangc() -> str:
    """The compiler; a skip where it is missing, a failure where IRONACCEL_REQUIRE asks for real runs."""
    from ironaccel.testing.pytest_plugin import required_backends
    from ironaccel_slang import INSTALL, find_slangc

    path = find_slangc()
    if path is None:
        message = f"no slangc here ({INSTALL})"
        if required_backends():
            pytest.fail(f"{message}; IRONACCEL_REQUIRE is set", pytrace=False)
        pytest.skip(message)
    return path


@pytest.fixture(autouse=True)
def slang_cache(tmp_path_factory, monkeypatch):
    """Each test's compiled outputs in a fresh private folder, none kept in memory from another test.

    The compiler's version is asked first (kept in memory for the process), so that its disk entry is not one
    of the test's entries; test_slang.py's test of that entry clears it."""
    from ironaccel_slang import compiler

    found = compiler.find_slangc()
    if found is not None:
        compiler.compiler_id(found)
    folder = tmp_path_factory.mktemp("slang-cache") / "cache"
    monkeypatch.setenv("IRONACCEL_SLANG_CACHE_DIR", str(folder))
    compiler.clear_memory()
    yield folder
    compiler.clear_memory()


@pytest.fixture(autouse=True)
def no_vulkan_validation_errors():
    """With IRONACCEL_VULKAN_VALIDATION=1, a test fails on any message of the Khronos validation layer."""
    try:
        from ironaccel_vulkan import validation
    except ImportError:
        yield
        return
    validation.clear_errors()
    yield
    errors = validation.errors()
    validation.clear_errors()
    if errors:
        pytest.fail("Vulkan validation errors:\n" + "\n".join(str(e) for e in errors), pytrace=False)
