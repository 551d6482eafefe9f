"""Docs coverage: every public name of every documented module has a docstring and a page in the build.

    python docs/coverage.py [BUILD_DIR]      # after `sphinx-build -b html docs BUILD_DIR` (default docs/_build/html)

The public names of a module are its `__all__` (the API pages are `automodule` of the modules named in
docs/api/*.rst); of a public class, the methods and properties it defines without a leading underscore.
A name fails when its docstring is empty or when the built inventory (objects.inv) has no entry for it,
under the module's name or where it is defined.  Exit status 1 lists every failure.

Every distribution is held to it: a single gap anywhere fails the docs build.  (A class member counts as
documented when a class it inherits from documents it.)
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

from sphinx.util.inventory import InventoryFile

HERE = Path(__file__).resolve().parent
SKIP = {"__version__"}


def documented_modules() -> list[str]:
    """The modules the API pages document (one `.. automodule::` per page)."""
    found = []
    for page in sorted((HERE / "api").glob("*.rst")):
        found += re.findall(r"^\.\. automodule:: (\S+)", page.read_text(), re.MULTILINE)
    return found


def inventory(build: Path) -> set[str]:
    with open(build / "objects.inv", "rb") as f:
        inv = InventoryFile.load(f, "", lambda base, uri: uri)
    return {name for kind, entries in inv.items() if kind.startswith("py:") for name in entries}


def names_of(obj: object, qualified: str) -> set[str]:
    """Where the inventory may list `obj`: under the module that exports it, or where it is defined."""
    out = {qualified}
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):
        out.add(f"{module}.{qualname}")
    return out


def public_members(cls: type) -> list[tuple[str, object]]:
    """Methods and properties `cls` itself defines, without a leading underscore."""
    out = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if inspect.isfunction(value) or isinstance(value, property):
            out.append((name, value))
    return out


def failures(build: Path) -> list[str]:
    known = inventory(build)
    out: list[str] = []
    for modname in documented_modules():
        module = importlib.import_module(modname)
        exported = getattr(module, "__all__", None)
        if exported is None:
            out.append(f"{modname}: no __all__ (the API page documents a module's __all__)")
            continue
        if not inspect.getdoc(module):
            out.append(f"{modname}: no module docstring")
        for name in exported:
            if name in SKIP:
                continue
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                continue  # a submodule re-exported by name; its own page (if public) covers it
            where = f"{modname}.{name}"
            if (inspect.isclass(obj) or inspect.isroutine(obj)) and not inspect.getdoc(obj):
                out.append(f"{where}: no docstring")
            if (inspect.isclass(obj) or inspect.isroutine(obj)) and not (names_of(obj, where) & known):
                out.append(f"{where}: not in the built API reference")
            if inspect.isclass(obj) and obj.__module__.split(".")[0] == modname.split(".")[0]:
                for member, value in public_members(obj):
                    doc = value.__doc__ if isinstance(value, property) else inspect.getdoc(value)
                    if not (doc or "").strip() and not _inherits_doc(obj, member):
                        out.append(f"{where}.{member}: no docstring")
    return sorted(set(out))


def _inherits_doc(cls: type, member: str) -> bool:
    """An override documented on a base class (or a protocol it implements) counts as documented."""
    for base in cls.__mro__[1:]:
        value = vars(base).get(member)
        if value is not None and (getattr(value, "__doc__", None) or "").strip():
            return True
    return False


def _imported_elsewhere() -> list[str]:
    """The packages imported from outside this checkout (an editable install of another tree wins over the
    checkout's sources unless PYTHONPATH names them): their gaps are that tree's, not this one's."""
    out = []
    for top in sorted({modname.split(".")[0] for modname in documented_modules()}):
        path = Path(getattr(sys.modules.get(top), "__file__", None) or HERE).resolve()
        if not path.is_relative_to(HERE.parent):
            out.append(f"{top} from {path.parent.parent}")
    return out


def main(argv: list[str]) -> int:
    build = Path(argv[0]) if argv else HERE / "_build" / "html"
    found = failures(build)
    if found:
        print(f"{len(found)} public names undocumented:")
        print("\n".join(f"  {line}" for line in found))
        elsewhere = _imported_elsewhere()
        if elsewhere:
            print(f"note: checked another tree's sources, not this checkout's ({HERE.parent}): " + "; ".join(elsewhere))
        return 1
    print(f"docs coverage: every public name of {len(documented_modules())} modules documented")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
