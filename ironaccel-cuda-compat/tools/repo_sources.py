"""The repository's source folders of the distributions the runners need that are not installed.

Each runner puts them on its child processes' PYTHONPATH (and, where it imports them itself, on sys.path), so a
checkout runs the peers' tests without installing ironaccel first.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: (import name, distribution folder), the compat first.
DISTRIBUTIONS = (("ironaccel_cuda_compat", "ironaccel-cuda-compat"), ("ironaccel_cuda", "ironaccel-cuda"),
                 ("ironaccel", "ironaccel-core"))


def missing_sources() -> list[str]:
    """`REPO/<distribution>/src` of each of DISTRIBUTIONS that Python cannot import."""
    return [str(REPO / folder / "src") for module, folder in DISTRIBUTIONS
            if importlib.util.find_spec(module) is None and (REPO / folder / "src").is_dir()]
