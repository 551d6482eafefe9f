"""Give Mesa's EGL and GL drivers a private XDG_RUNTIME_DIR, so they do not complain about it."""

import os
import tempfile

if not os.environ.get("XDG_RUNTIME_DIR") or not os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
    os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="ironaccel-xdg-")  # mkdtemp makes it mode 700
