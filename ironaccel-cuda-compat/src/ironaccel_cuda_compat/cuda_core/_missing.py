"""Names of cuda.core that the compat does not provide yet: importable, and typed errors when used.

`from cuda.core import ManagedMemoryResource` must keep working in code that never
uses it (cuda.core's own test suite imports many names at module level), so each
missing class or function exists and says, when constructed, called, or asked for a
class attribute, which ironaccel feature it waits for.  The coverage map lists them.
"""

from __future__ import annotations

from typing import Any

from ironaccel.errors import Unsupported

__all__ = ["MissingFeature", "missing_class", "missing_function", "missing_error"]


def missing_error(name: str, needs: str) -> Unsupported:
    return Unsupported("cuda", f"cuda.core.{name}",
                       f"the cuda.core compat has no {name} yet: it needs {needs}")


class _MissingMeta(type):
    _needs: str

    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise missing_error(f"{cls.__name__}.{attr}", cls._needs)


class MissingFeature(metaclass=_MissingMeta):
    """Base of the placeholder classes: constructing one raises Unsupported (a NotImplementedError)."""

    _needs = "an ironaccel feature"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise missing_error(type(self).__name__, self._needs)


def missing_class(name: str, needs: str, module: str) -> type:
    """A placeholder class `name` (in `module`) whose use raises Unsupported naming `needs`."""
    return _MissingMeta(name, (MissingFeature,), {"_needs": needs, "__module__": module,
                                                   "__doc__": f"Not available in the compat yet: needs {needs}."})


def missing_function(name: str, needs: str, module: str) -> Any:
    """A placeholder function `name` that raises Unsupported naming `needs`."""

    def placeholder(*args: Any, **kwargs: Any) -> Any:
        raise missing_error(name, needs)

    placeholder.__name__ = placeholder.__qualname__ = name
    placeholder.__module__ = module
    placeholder.__doc__ = f"Not available in the compat yet: needs {needs}."
    return placeholder
