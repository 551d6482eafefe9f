"""ironaccel_cuda.compat, the compat's old home, stays importable for one minor release: the same modules, with
a DeprecationWarning naming ironaccel_cuda_compat (the project's deprecation rule)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> subprocess.CompletedProcess:
    # A fresh interpreter: the warning is given once, when ironaccel_cuda.compat is first imported.
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


def test_the_old_names_warn_and_give_the_very_modules_of_the_new_package():
    out = _run("""
        import sys, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from ironaccel_cuda.compat import cuda_core, pycuda
            import ironaccel_cuda.compat.pycuda.driver as drv
            from ironaccel_cuda.compat.cuda_core.utils import StridedMemoryView
        import ironaccel_cuda_compat
        from ironaccel_cuda_compat.cuda_core.utils import StridedMemoryView as new_view
        deprecations = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
        print(len(deprecations), "ironaccel_cuda_compat" in deprecations[0])
        print(cuda_core is ironaccel_cuda_compat.cuda_core, pycuda is ironaccel_cuda_compat.pycuda,
              drv is sys.modules["ironaccel_cuda_compat.pycuda.driver"], StridedMemoryView is new_view)
        print(cuda_core.__spec__.name, cuda_core.install is ironaccel_cuda_compat.cuda_core.install)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["1 True", "True True True True", "ironaccel_cuda_compat.cuda_core True"]


def test_the_new_package_imports_without_a_warning():
    out = _run("""
        import warnings
        warnings.simplefilter("error", DeprecationWarning)
        from ironaccel_cuda_compat import cuda_core, pycuda
        import ironaccel_cuda
        print(hasattr(ironaccel_cuda, "compat"), cuda_core.__name__, pycuda.__name__)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False ironaccel_cuda_compat.cuda_core ironaccel_cuda_compat.pycuda"


def test_a_name_the_compat_does_not_have_is_still_missing_under_the_old_name():
    out = _run("""
        import warnings
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import ironaccel_cuda.compat.no_such_surface
        except ModuleNotFoundError as exc:
            print("missing", exc.name)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "missing ironaccel_cuda.compat.no_such_surface"


def test_without_the_new_distribution_the_old_name_says_what_to_install():
    out = _run("""
        import sys, warnings
        warnings.simplefilter("ignore", DeprecationWarning)
        sys.modules["ironaccel_cuda_compat"] = None  # as if ironaccel-cuda-compat were not installed
        try:
            import ironaccel_cuda.compat.cuda_core
        except ModuleNotFoundError as exc:
            print(exc.name, "pip install ironaccel-cuda-compat" in str(exc))
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ironaccel_cuda.compat True"
