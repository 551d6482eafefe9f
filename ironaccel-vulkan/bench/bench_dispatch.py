"""Dispatch round trip: ironaccel-vulkan against the same work written directly on pyvulkan.

    python ironaccel-vulkan/bench/bench_dispatch.py                      # lavapipe, or the first device
    VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \\
        python ironaccel-vulkan/bench/bench_dispatch.py --json out.json  # the H200

The work is y = a * x + b (tests/kernels/scale_offset.spv) for a small buffer and for 64 MiB, in two
scenarios, each checked once on both sides, then sampled together in rounds (bench/harness.py: batches of
~2 ms, the order alternating) and reported as ironaccel / direct time with its bootstrap 95% interval
(bench/versus.py):

* round trip: upload x into a new buffer, allocate y, dispatch, download y, free both.  The direct
  version creates and frees its buffers, memory, descriptor set and command buffer every time, as
  ironaccel does for new buffers; both build the pipeline (and a staging buffer) once, up front.
* repeated: the same buffers every time: write x, dispatch, download y.  The direct version prebuilds
  everything (descriptor set, recorded command buffers, submit infos, fence) and only copies, submits
  and waits; ironaccel must match it from its caches.

Both move data the same way on a device: mapped host-visible memory where device-local memory is
host-visible (lavapipe, integrated GPUs), else device-local buffers with staged copies, one submit
per step (copy in, dispatch, copy out) and one wait.  Targets (ironaccel / direct): round trip within
1.15x, repeated dispatch no slower (<= 1.0).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from harness import Case
from versus import compare, publish, repeat, report

HERE = Path(__file__).resolve().parent
SPV = (HERE.parent / "tests" / "kernels" / "scale_offset.spv").read_bytes()
A, B = np.float32(1.5), np.float32(-0.25)
UINT64_MAX = 0xFFFFFFFFFFFFFFFF


def grid(n: int) -> tuple[int, int]:
    groups = -(-n // 64)
    return (min(groups, 4096), -(-groups // 4096))


# -- ironaccel ------------------------------------------------------------------------------------------------


class Ironaccel:
    def __init__(self, ordinal: int, memory: str):
        from ironaccel_vulkan import Backend

        self.dev = Backend(validation=False).open(ordinal, memory=memory)
        self.pipe = self.dev.pipeline(SPV, buffers=2, params=3)
        self.mapped = self.dev.memory_mode == "mapped"
        self.warm: dict[int, tuple[Any, Any, np.ndarray]] = {}

    def round_trip(self, x: np.ndarray) -> np.ndarray:
        dev, n = self.dev, x.size
        xs, ys = dev.upload(x), dev.alloc(n, "float32")
        dev.dispatch(self.pipe, [xs, ys], grid(n), (A, B, np.uint32(n)))
        y = dev.download(ys)
        xs.close()
        ys.close()
        return y

    def repeated(self, x: np.ndarray) -> np.ndarray:
        n = x.size
        if n not in self.warm:
            self.warm[n] = (self.dev.alloc(n), self.dev.alloc(n), np.empty(n, np.float32))
        xs, ys, out = self.warm[n]
        self.dev.write(xs, x)
        self.dev.dispatch(self.pipe, [xs, ys], grid(n), (A, B, np.uint32(n)))
        return self.dev.download(ys, out)

    def close(self) -> None:
        for xs, ys, _ in self.warm.values():
            xs.close()
            ys.close()
        self.pipe.close()
        self.dev.close()


# -- direct pyvulkan ------------------------------------------------------------------------------------------


class Direct:
    """The same work on pyvulkan's own API, written the way its examples are."""

    def __init__(self, ordinal: int, max_bytes: int, mapped: bool | None):
        import vulkan as vk

        self.vk = vk
        app = vk.VkApplicationInfo(pApplicationName="bench", apiVersion=vk.VK_MAKE_VERSION(1, 1, 0))
        self.instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(pApplicationInfo=app), None)
        self.physical = vk.vkEnumeratePhysicalDevices(self.instance)[ordinal]
        props = vk.vkGetPhysicalDeviceProperties(self.physical)
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical)
        compute = [i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT]
        dedicated = [i for i in compute if not families[i].queueFlags & vk.VK_QUEUE_GRAPHICS_BIT]
        self.family = (dedicated or compute)[0]
        self.memprops = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=self.family, queueCount=1, pQueuePriorities=[1.0])
        self.device = vk.vkCreateDevice(self.physical, vk.VkDeviceCreateInfo(pQueueCreateInfos=[queue_info]), None)
        self.queue = vk.vkGetDeviceQueue(self.device, self.family, 0)
        uma_flags = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | \
            vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        uma = props.deviceType in (vk.VK_PHYSICAL_DEVICE_TYPE_CPU, vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU) and any(
            self.memprops.memoryTypes[i].propertyFlags & uma_flags == uma_flags
            for i in range(self.memprops.memoryTypeCount))
        self.mapped = uma if mapped is None else mapped

        self.pool = vk.vkCreateCommandPool(self.device, vk.VkCommandPoolCreateInfo(
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, queueFamilyIndex=self.family), None)
        self.module = vk.vkCreateShaderModule(self.device, vk.VkShaderModuleCreateInfo(
            codeSize=len(SPV), pCode=SPV), None)
        bindings = [vk.VkDescriptorSetLayoutBinding(binding=i, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                    descriptorCount=1, stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
                    for i in range(2)]
        self.set_layout = vk.vkCreateDescriptorSetLayout(self.device, vk.VkDescriptorSetLayoutCreateInfo(
            pBindings=bindings), None)
        push = vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=12)
        self.layout = vk.vkCreatePipelineLayout(self.device, vk.VkPipelineLayoutCreateInfo(
            pSetLayouts=[self.set_layout], pPushConstantRanges=[push]), None)
        stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=self.module,
                                                   pName="main")
        self.pipeline = vk.vkCreateComputePipelines(self.device, None, 1, [vk.VkComputePipelineCreateInfo(
            stage=stage, layout=self.layout)], None)[0]
        sizes = [vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=64)]
        self.dpool = vk.vkCreateDescriptorPool(self.device, vk.VkDescriptorPoolCreateInfo(
            flags=vk.VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT, maxSets=32, pPoolSizes=sizes), None)
        self.fence = vk.vkCreateFence(self.device, vk.VkFenceCreateInfo(), None)
        self.staging = None if self.mapped else self._buffer(max_bytes, host=True)
        self.warm: dict[int, Any] = {}

    # helpers
    def _memory_type(self, bits: int, host: bool) -> int:
        vk = self.vk
        want = (vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) if host else \
            vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
        for i in range(self.memprops.memoryTypeCount):
            if bits >> i & 1 and self.memprops.memoryTypes[i].propertyFlags & want == want:
                return i
        raise RuntimeError("no memory type")

    def _buffer(self, nbytes: int, host: bool) -> tuple[Any, Any, np.ndarray | None]:
        vk = self.vk
        usage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | \
            vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        buf = vk.vkCreateBuffer(self.device, vk.VkBufferCreateInfo(size=nbytes, usage=usage,
                                                                   sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        req = vk.vkGetBufferMemoryRequirements(self.device, buf)
        mem = vk.vkAllocateMemory(self.device, vk.VkMemoryAllocateInfo(
            allocationSize=req.size, memoryTypeIndex=self._memory_type(req.memoryTypeBits, host)), None)
        vk.vkBindBufferMemory(self.device, buf, mem, 0)
        view = np.frombuffer(vk.vkMapMemory(self.device, mem, 0, nbytes, 0), np.uint8) if host else None
        return buf, mem, view

    def _free(self, b: tuple[Any, Any, Any]) -> None:
        self.vk.vkDestroyBuffer(self.device, b[0], None)
        self.vk.vkFreeMemory(self.device, b[1], None)

    def _descriptor_set(self, xb: Any, yb: Any) -> Any:
        vk = self.vk
        ds = vk.vkAllocateDescriptorSets(self.device, vk.VkDescriptorSetAllocateInfo(
            descriptorPool=self.dpool, descriptorSetCount=1, pSetLayouts=[self.set_layout]))[0]
        writes = [vk.VkWriteDescriptorSet(dstSet=ds, dstBinding=i, descriptorCount=1,
                                          descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          pBufferInfo=[vk.VkDescriptorBufferInfo(buffer=b, offset=0,
                                                                                 range=UINT64_MAX)])
                  for i, b in enumerate((xb, yb))]
        vk.vkUpdateDescriptorSets(self.device, 2, writes, 0, None)
        return ds

    def _commands(self, count: int) -> list[Any]:
        vk = self.vk
        return list(vk.vkAllocateCommandBuffers(self.device, vk.VkCommandBufferAllocateInfo(
            commandPool=self.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=count)))

    def _barrier(self, cmd: Any, src_stage: int, src: int, dst_stage: int, dst: int) -> None:
        vk = self.vk
        vk.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1,
                                [vk.VkMemoryBarrier(srcAccessMask=src, dstAccessMask=dst)], 0, None, 0, None)

    def _record_dispatch(self, cmd: Any, ds: Any, n: int) -> None:
        vk = self.vk
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo())
        self._barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT | vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      vk.VK_ACCESS_TRANSFER_WRITE_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT,
                      vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, self.pipeline)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, self.layout, 0, 1, [ds], 0, None)
        params = np.array([A.view(np.uint32), B.view(np.uint32), n], np.uint32).tobytes()
        vk.vkCmdPushConstants(cmd, self.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, 12, vk.ffi.from_buffer(params))
        vk.vkCmdDispatch(cmd, *grid(n), 1)
        self._barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT,
                      vk.VK_PIPELINE_STAGE_HOST_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                      vk.VK_ACCESS_HOST_READ_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT)
        vk.vkEndCommandBuffer(cmd)

    def _record_copy(self, cmd: Any, src: Any, dst: Any, nbytes: int) -> None:
        vk = self.vk
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo())
        self._barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                      vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                      vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                      vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT)
        vk.vkCmdCopyBuffer(cmd, src, dst, 1, [vk.VkBufferCopy(srcOffset=0, dstOffset=0, size=nbytes)])
        self._barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                      vk.VK_PIPELINE_STAGE_HOST_BIT | vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      vk.VK_ACCESS_HOST_READ_BIT | vk.VK_ACCESS_SHADER_READ_BIT)
        vk.vkEndCommandBuffer(cmd)

    def _submit_and_wait(self, submits: list[Any]) -> None:
        vk = self.vk
        for s in submits[:-1]:
            vk.vkQueueSubmit(self.queue, 1, s, None)
        vk.vkQueueSubmit(self.queue, 1, submits[-1], self.fence)
        vk.vkWaitForFences(self.device, 1, [self.fence], vk.VK_TRUE, UINT64_MAX)
        vk.vkResetFences(self.device, 1, [self.fence])

    # the two scenarios
    def round_trip(self, x: np.ndarray) -> np.ndarray:
        vk, nbytes = self.vk, x.nbytes
        src = x.view(np.uint8)
        xb, yb = self._buffer(nbytes, self.mapped), self._buffer(nbytes, self.mapped)
        ds = self._descriptor_set(xb[0], yb[0])
        y = np.empty(x.size, np.float32)
        if self.mapped:
            (cmd,) = self._commands(1)
            np.copyto(xb[2], src)
            self._record_dispatch(cmd, ds, x.size)
            self._submit_and_wait([vk.VkSubmitInfo(pCommandBuffers=[cmd])])
            np.copyto(y.view(np.uint8), yb[2])
        else:
            cmds = self._commands(3)
            np.copyto(self.staging[2][:nbytes], src)
            self._record_copy(cmds[0], self.staging[0], xb[0], nbytes)
            self._record_dispatch(cmds[1], ds, x.size)
            self._record_copy(cmds[2], yb[0], self.staging[0], nbytes)
            self._submit_and_wait([vk.VkSubmitInfo(pCommandBuffers=[c]) for c in cmds])
            np.copyto(y.view(np.uint8), self.staging[2][:nbytes])
        vk.vkFreeCommandBuffers(self.device, self.pool, 1 if self.mapped else 3, [cmd] if self.mapped else cmds)
        vk.vkFreeDescriptorSets(self.device, self.dpool, 1, [ds])
        self._free(xb)
        self._free(yb)
        return y

    def repeated(self, x: np.ndarray) -> np.ndarray:
        nbytes = x.nbytes
        if nbytes not in self.warm:  # prebuild everything once
            vk = self.vk
            xb, yb = self._buffer(nbytes, self.mapped), self._buffer(nbytes, self.mapped)
            ds = self._descriptor_set(xb[0], yb[0])
            if self.mapped:
                cmds = self._commands(1)
                self._record_dispatch(cmds[0], ds, x.size)
            else:
                cmds = self._commands(3)
                self._record_copy(cmds[0], self.staging[0], xb[0], nbytes)
                self._record_dispatch(cmds[1], ds, x.size)
                self._record_copy(cmds[2], yb[0], self.staging[0], nbytes)
            submits = [vk.VkSubmitInfo(pCommandBuffers=[c]) for c in cmds]
            self.warm[nbytes] = (xb, yb, ds, cmds, submits, np.empty(x.size, np.float32))
        xb, yb, ds, cmds, submits, y = self.warm[nbytes]
        if self.mapped:
            np.copyto(xb[2], x.view(np.uint8))
            self._submit_and_wait(submits)
            np.copyto(y.view(np.uint8), yb[2])
        else:
            np.copyto(self.staging[2][:nbytes], x.view(np.uint8))
            self._submit_and_wait(submits)
            np.copyto(y.view(np.uint8), self.staging[2][:nbytes])
        return y

    def close(self) -> None:
        vk, d = self.vk, self.device
        vk.vkDeviceWaitIdle(d)
        for xb, yb, _, _, _, _ in self.warm.values():
            self._free(xb)
            self._free(yb)
        if self.staging is not None:
            self._free(self.staging)
        vk.vkDestroyFence(d, self.fence, None)
        vk.vkDestroyDescriptorPool(d, self.dpool, None)
        vk.vkDestroyPipeline(d, self.pipeline, None)
        vk.vkDestroyPipelineLayout(d, self.layout, None)
        vk.vkDestroyDescriptorSetLayout(d, self.set_layout, None)
        vk.vkDestroyShaderModule(d, self.module, None)
        vk.vkDestroyCommandPool(d, self.pool, None)
        vk.vkDestroyDevice(d, None)
        vk.vkDestroyInstance(self.instance, None)


# -- measurement ----------------------------------------------------------------------------------------------

TARGETS = {"round_trip": 1.15, "repeated": 1.0}


def size_label(nbytes: int) -> str:
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}"
    return f"{nbytes}B"


def case(op: Callable[[np.ndarray], np.ndarray], x: np.ndarray, want: np.ndarray) -> Case:
    """One side of a scenario: `op(x)` timed in batches, checked once against y = A * x + B."""
    return Case(run=repeat(lambda: op(x)),
                check=lambda: np.testing.assert_allclose(op(x), want, rtol=1e-6, atol=1e-6))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--small-bytes", type=int, default=4096)
    parser.add_argument("--large-bytes", type=int, default=64 << 20)
    parser.add_argument("--pairs-small", type=int, default=400, help="rounds per small case")
    parser.add_argument("--pairs-large", type=int, default=20, help="rounds per large case")
    parser.add_argument("--memory", choices=("auto", "mapped", "staged"), default="auto",
                        help="ironaccel's memory mode; the direct version follows it")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--no-baseline", action="store_true", help="do not overwrite bench/BASELINE.md")
    args = parser.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="ironaccel-xdg-"))

    ia = Ironaccel(args.device, args.memory)
    direct = Direct(args.device, args.large_bytes, mapped=ia.mapped)
    assert direct.mapped == ia.mapped
    d = ia.dev.descriptor
    print(f"device: {d.name} ({d.extras['device_type']}, Vulkan {d.extras['api_version']}, "
          f"driver {d.extras['driver_info'] or d.extras['driver_version']}); memory: {ia.dev.memory_mode}")
    rng = np.random.default_rng(0)
    rows = []
    try:
        for nbytes, rounds in ((args.small_bytes, args.pairs_small), (args.large_bytes, args.pairs_large)):
            x = rng.standard_normal(nbytes // 4, dtype=np.float32)
            want = A * x + B
            for scenario, target in TARGETS.items():
                rows.append(compare(f"{scenario}_{size_label(nbytes)}", case(getattr(ia, scenario), x, want),
                                    case(getattr(direct, scenario), x, want), rounds=rounds, target=target))
    finally:
        ia.close()
        direct.close()
    facts = {"driver": d.extras["driver_info"] or d.extras["driver_version"], "memory": ia.dev.memory_mode,
             "descriptor": d.to_dict()}
    publish(report("vulkan", d.name, f"pyvulkan {version('vulkan')}", facts, rows), args.json,
            baseline=None if args.no_baseline else Path(__file__).with_name("BASELINE.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
