"""cuda.core's explicit graphs (`GraphDefinition`, `GraphCondition`): waiting for issue 15's graph nodes."""

from __future__ import annotations

from .. import _needs
from .._missing import missing_class

__all__ = ["GraphCondition", "GraphDefinition"]

GraphDefinition = missing_class("GraphDefinition", _needs.GRAPH_NODES, __name__)
GraphCondition = missing_class("GraphCondition", _needs.CONDITIONALS, __name__)
