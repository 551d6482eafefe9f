"""cuda.core's graph node classes: waiting for issue 15's graph nodes, conditionals and host callbacks."""

from __future__ import annotations

from .. import _needs
from .._missing import missing_class

__all__ = [
    "AllocNode", "ChildGraphNode", "ConditionalNode", "EmptyNode", "EventRecordNode", "EventWaitNode",
    "ExecutableChildGraphNode", "ExecutableEventRecordNode", "ExecutableEventWaitNode", "ExecutableGraphNode",
    "ExecutableHostCallbackNode", "ExecutableKernelNode", "ExecutableMemcpyNode", "ExecutableMemsetNode", "FreeNode",
    "GraphNode", "HostCallbackNode", "IfElseNode", "IfNode", "KernelNode", "MemcpyNode",
    "MemsetNode", "SwitchNode", "WhileNode",
]

AllocNode = missing_class("AllocNode", _needs.GRAPH_NODES, __name__)
ChildGraphNode = missing_class("ChildGraphNode", _needs.GRAPH_NODES, __name__)
ConditionalNode = missing_class("ConditionalNode", _needs.CONDITIONALS, __name__)
EmptyNode = missing_class("EmptyNode", _needs.GRAPH_NODES, __name__)
EventRecordNode = missing_class("EventRecordNode", _needs.GRAPH_NODES, __name__)
EventWaitNode = missing_class("EventWaitNode", _needs.GRAPH_NODES, __name__)
ExecutableChildGraphNode = missing_class("ExecutableChildGraphNode", _needs.GRAPH_NODES, __name__)
ExecutableEventRecordNode = missing_class("ExecutableEventRecordNode", _needs.GRAPH_NODES, __name__)
ExecutableEventWaitNode = missing_class("ExecutableEventWaitNode", _needs.GRAPH_NODES, __name__)
ExecutableGraphNode = missing_class("ExecutableGraphNode", _needs.GRAPH_NODES, __name__)
ExecutableHostCallbackNode = missing_class("ExecutableHostCallbackNode", _needs.CALLBACKS, __name__)
ExecutableKernelNode = missing_class("ExecutableKernelNode", _needs.GRAPH_NODES, __name__)
ExecutableMemcpyNode = missing_class("ExecutableMemcpyNode", _needs.GRAPH_NODES, __name__)
ExecutableMemsetNode = missing_class("ExecutableMemsetNode", _needs.GRAPH_NODES, __name__)
FreeNode = missing_class("FreeNode", _needs.GRAPH_NODES, __name__)
GraphNode = missing_class("GraphNode", _needs.GRAPH_NODES, __name__)
HostCallbackNode = missing_class("HostCallbackNode", _needs.CALLBACKS, __name__)
IfElseNode = missing_class("IfElseNode", _needs.CONDITIONALS, __name__)
IfNode = missing_class("IfNode", _needs.CONDITIONALS, __name__)
KernelNode = missing_class("KernelNode", _needs.GRAPH_NODES, __name__)
MemcpyNode = missing_class("MemcpyNode", _needs.GRAPH_NODES, __name__)
MemsetNode = missing_class("MemsetNode", _needs.GRAPH_NODES, __name__)
SwitchNode = missing_class("SwitchNode", _needs.CONDITIONALS, __name__)
WhileNode = missing_class("WhileNode", _needs.CONDITIONALS, __name__)
