"""Pick the best device on this machine for general compute, across every usable backend.

    python examples/pick_device.py

A dispatcher's first question.  Ranks the devices of every available backend: accelerators before CPUs,
then the compute tier, then memory, then backends with a native compute path before the cross-vendor ones.
Nothing is opened until the choice is made; then the chosen device is opened and closed again.
"""

import ironaccel
from ironaccel import DeviceDescriptor, DeviceKind

# Native driver layers first; cross-vendor compute APIs after (the same GPU is often visible through both).
PREFERENCE = ["cuda", "rocm", "levelzero", "metal", "pjrt", "neuron", "qnn", "vulkan", "webgpu", "opengl"]


def rank(dev: DeviceDescriptor) -> tuple[int, int, int, int]:
    """Bigger is better: accelerator, tier, memory, then the backend's place in PREFERENCE."""
    where = PREFERENCE.index(dev.backend) if dev.backend in PREFERENCE else len(PREFERENCE)
    return (dev.kind is not DeviceKind.CPU, int(dev.compute_tier), dev.memory_bytes, -where)


def main() -> None:
    candidates = ironaccel.devices()  # every available backend's devices; unusable ones are skipped
    if not candidates:
        print("no usable device on this machine; `python examples/survey.py` says why")
        return
    for dev in sorted(candidates, key=rank, reverse=True):
        print(f"{dev.backend}:{dev.ordinal} {dev.name} ({dev.kind.value}, tier {dev.compute_tier.name.lower()})")
    best = max(candidates, key=rank)
    print(f"picked {best.backend}:{best.ordinal} {best.name}")
    device = ironaccel.open(best.backend, best.ordinal)
    try:
        assert device.descriptor.name == best.name
    finally:
        device.close()


if __name__ == "__main__":
    main()
