"""What each missing part of the compat waits for: the ironaccel feature and who adds it."""

from __future__ import annotations

POOLS = "driver memory pools created by ironaccel (cuMemPoolCreate, pool options and attributes; issue 10)"
PINNED_POOLS = "host (pinned) memory pools in ironaccel (issue 10)"
MANAGED = "managed memory and its prefetch/advise/discard operations in ironaccel (issue 10)"
VMM = "virtual memory management in ironaccel (issue 10)"
IPC = "IPC of memory pools and buffers in ironaccel (issue 10)"
GRAPH_MEMORY = "graph memory nodes and the graph memory pool in ironaccel (issue 10 / issue 15)"
GRAPH_NODES = "explicit graph definitions and nodes in ironaccel (issue 15)"
CONDITIONALS = "conditional graph nodes in ironaccel (issue 15)"
CALLBACKS = "host callbacks in ironaccel (issue 15)"
STRIDED_COPY = ("copies between strided views, which cuda.core 1.2 does not have either (its copy_from / copy_to "
                "raise NotImplementedError too)")
NVML = "NVML (cuda.core.system): out of the compat's scope"
TEXTURES = "textures, surfaces and CUDA arrays: out of the compat's scope"
GRAPHICS = "graphics interop: out of the compat's scope"
TENSOR_MAP = "TMA tensor map descriptors: out of the compat's scope"
CHECKPOINT = "process checkpointing (cuCheckpoint*): out of the compat's scope"
