"""Who sees GL's writes into imported memory: CUDA-exported memory imported non-dedicated and dedicated, and
Vulkan-exported memory.  Run on an NVIDIA GPU from the repository root:

    python ironaccel-opengl/bench/experiments/gl_cuda_import.py

Finding (H100, driver 580): imported non-dedicated, GL reads CUDA's data right but CUDA sees garbage after GL
writes; imported dedicated, both directions are right.  So OpenGL imports CUDA exports as dedicated."""
import sys

import numpy as np

sys.path.insert(0, "ironaccel-cuda/tests")
from helpers.zero_copy_children import twin  # noqa: E402

import ironaccel_cuda as cu  # noqa: E402


def bad(got, want):
    wrong = np.flatnonzero(got != want)
    return f"{wrong.size} wrong" + (f" (first {wrong[0]})" if wrong.size else "")


dev = cu.Device(0)
gl = twin(dev, "opengl", "import_memory")
vk = twin(dev, "vulkan", "export_memory")
n = 1 << 16
data = np.arange(n, dtype=np.float32) - n // 2
for dedicated in (False, True):
    src = dev.alloc(n, "float32", exportable=True)
    dev.write(src, data)
    dev.synchronize()
    with dev.export_memory(src) as ext:
        ext.dedicated = dedicated
        ext.backend = "experiment"  # OpenGL forces dedicated for backend "cuda"; this measures both
        seen = gl.import_memory(ext, n, "float32")
    gl.write(seen, data * 5)
    gl.synchronize()
    print(f"cuda->gl dedicated={dedicated}: gl reads {bad(gl.download(seen), data * 5)}, "
          f"cuda reads {bad(dev.download(src), data * 5)}", flush=True)
    seen.close()
    src.close()
buf = vk.alloc(n, "float32", exportable=True)
vk.write(buf, data)
vk.synchronize()
with vk.export_memory(buf) as ext:
    print("vulkan export dedicated:", ext.dedicated, "size", ext.size)
    seen = gl.import_memory(ext, n, "float32")
    mirror = dev.import_memory(ext, n, "float32")
print("vk->gl gl reads", bad(gl.download(seen), data), "; vk->cuda cuda reads", bad(dev.download(mirror), data))
gl.write(seen, data * 5)
gl.synchronize()
print("after gl write: vulkan reads", bad(vk.download(buf), data * 5), "; cuda reads",
      bad(dev.download(mirror), data * 5), flush=True)
