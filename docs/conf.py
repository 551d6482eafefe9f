"""Sphinx configuration of ironaccel's documentation (built by .ci/docs with warnings as errors).

Why Sphinx (autodoc + myst-parser + intersphinx) and not mkdocs: the API reference is generated from the
docstrings by importing the packages, the guides stay Markdown (myst) so the READMEs' style carries over, and
intersphinx resolves Python's, numpy's and cuda-python's names to their own documentation.  `nitpicky` plus -W
makes a broken cross-reference fail the build.  No napoleon: the docstrings are prose with `code` spans, not
Google or NumPy sections, and napoleon read a property's "What it is: ..." first line as a type.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The sources of this checkout first, for building without installing (CI installs them editable anyway).
for src in sorted(ROOT.glob("ironaccel-*/src")):
    if str(src) not in sys.path:
        sys.path.append(str(src))

project = "ironaccel"
copyright = "the ironaccel contributors; Apache-2.0"
release = (ROOT / "VERSION").read_text().strip()
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "README.md"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True

# Offline builds (IRONACCEL_DOCS_OFFLINE=1) skip the inventories: their references then render as text.
intersphinx_mapping = {} if os.environ.get("IRONACCEL_DOCS_OFFLINE") else {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable", None),
    "cuda-bindings": ("https://nvidia.github.io/cuda-python/cuda-bindings/latest", None),
    "cuda-core": ("https://nvidia.github.io/cuda-python/cuda-core/latest", None),
}
intersphinx_timeout = 30

# Docstrings write `name` (single backticks) for code: render it as code, not as a title reference.
default_role = "code"
# Private bases and helpers (a leading underscore anywhere in the dotted name) and the compiled core's types are
# not documented; a public signature that names one renders it as text.  Offline, the standard library's and
# numpy's names render as text too.
nitpick_ignore_regex = [
    (r"py:.*", r"~?(.*\.)?_[A-Za-z].*"),
    (r"py:.*", r"ironaccel\.probing\.StateT|DTypeLike|TypeVar|ModuleType"),
    # Implementation types that public signatures name (a backend's own records), not part of the API.
    (r"py:class", r"(ironaccel_vulkan\.physical\.)?PhysicalDeviceInfo|Binding|Instance|PipelineState|Storage"),
    (r"py:class", r"ironaccel_webgpu\.adapters\.AdapterEntry"),
    (r"py:class", r"(ironaccel_rocm\.device\.)?(Stream|Module|DeviceMemory|Event|PinnedMemory)|HipComputeDevice"),
    (r"py:class", r"ironaccel_cuda\.execution\.CudaExecution"),
]
if not intersphinx_mapping:
    _stdlib = r"(collections|enum|types|ctypes|typing|numpy|np|os|pathlib|threading)\..*"
    nitpick_ignore_regex.append((r"py:.*", _stdlib))
# "ref.python": an annotation naming a class that two packages export (Program, Event) is ambiguous to Sphinx.
suppress_warnings = ["myst.header", "myst.xref_missing", "ref.python"]

html_theme = "alabaster"
html_title = f"ironaccel {release}"
html_static_path: list[str] = []


def _members_from_all(app, docname, source):
    """Give every `.. automodule::` its module's `__all__` as explicit members.

    The backends export lazily (a module `__getattr__`), so autodoc's own member scan of the module's namespace
    misses them: each is resolved into the namespace (in the docs build's process only) and named.
    The page lists exactly `__all__`, so it
    cannot drift from the code."""
    import importlib
    import re

    def expand(match):
        name = match.group(1)
        module = importlib.import_module(name)
        exported = [n for n in getattr(module, "__all__", []) if n != "__version__"]
        for n in exported:  # resolve the lazy names into the namespace, where autodoc's scan looks
            setattr(module, n, getattr(module, n))
        exported = [n for n in exported if not _is_module(getattr(module, n))]
        return f".. automodule:: {name}\n   :members: {', '.join(exported)}\n" if exported else match.group(0)

    source[0] = re.sub(r"^\.\. automodule:: (\S+)\n", expand, source[0], flags=re.MULTILINE)


def _is_module(obj):
    import types

    return isinstance(obj, types.ModuleType)


def setup(app):
    app.connect("source-read", _members_from_all)
