"""The pluggy PluginManager of a BackendRegistry, with ironaccel's hook specifications.

A module of its own so that pluggy is imported by the registry's first use, not by `import ironaccel`.
"""

from __future__ import annotations

import pluggy

from . import hookspecs


def plugin_manager() -> pluggy.PluginManager:
    """A new PluginManager of project "ironaccel" that knows the hooks of `ironaccel.hookspecs`."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    return manager
