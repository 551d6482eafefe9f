"""Preload the NVIDIA libraries of pip's ``nvidia-*`` wheels before a CUDA plugin makes a client.

The CUDA plugin dlopens cuBLAS, cuDNN, NCCL... by soname at client creation.
Its RPATH points at ``site-packages/nvidia/...``, which works when the plugin
and the wheels share one site-packages; JAX preloads them from the ``nvidia``
namespace package anyway (``jax_plugins/xla_cuda13/__init__.py``), and so do we,
so that a split install (plugin in one path entry, libraries in another)
behaves as it does under JAX.  Best effort: a library that is not there is
skipped, and the plugin's own search still applies.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading

__all__ = ["preload_nvidia_libraries"]

#: (folder under a ``nvidia`` path entry, library), in dependency order, as JAX loads them for CUDA 12 and 13.
LIBRARIES = (
    ("cu13/lib", "libcudart.so.13"), ("cuda_runtime/lib", "libcudart.so.12"),
    ("cu13/lib", "libnvrtc.so.13"), ("cuda_nvrtc/lib", "libnvrtc.so.12"),
    ("cu13/lib", "libcublasLt.so.13"), ("cu13/lib", "libcublas.so.13"),
    ("cublas/lib", "libcublasLt.so.12"), ("cublas/lib", "libcublas.so.12"),
    ("cu13/lib", "libcupti.so.13"), ("cuda_cupti/lib", "libcupti.so.12"),
    ("cu13/lib", "libcusparse.so.12"), ("cusparse/lib", "libcusparse.so.12"),
    ("cu13/lib", "libcusolver.so.12"), ("cusolver/lib", "libcusolver.so.11"),
    ("cu13/lib", "libcufft.so.12"), ("cufft/lib", "libcufft.so.11"),
    ("nccl/lib", "libnccl.so.2"), ("nvshmem/lib", "libnvshmem_host.so.3"), ("cudnn/lib", "libcudnn.so.9"),
)

_done = False
_lock = threading.Lock()
_handles: list[ctypes.CDLL] = []


def preload_nvidia_libraries() -> list[str]:
    """Load the libraries found under the ``nvidia`` namespace package (once); returns their paths."""
    global _done
    with _lock:
        if _done:
            return [h._name for h in _handles]
        _done = True
        try:
            spec = importlib.util.find_spec("nvidia")  # a namespace package: nothing runs
        except (ImportError, ValueError):
            spec = None
        roots = list(spec.submodule_search_locations or []) if spec is not None else []
        loaded: set[str] = set()
        for folder, name in LIBRARIES:
            if name in loaded:
                continue
            for root in roots:
                path = os.path.join(root, folder, name)
                if os.path.isfile(path):
                    try:
                        _handles.append(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))
                        loaded.add(name)
                    except OSError:
                        pass
                    break
        return [h._name for h in _handles]
