"""Benchmark (not a test): ironaccel's Vulkan command batches against plain dispatches and against pyvulkan.

    python ironaccel-vulkan/bench/bench_batch.py [--device N] [--pairs N] [--dispatches N] [--json out.json]
    VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \\
        python ironaccel-vulkan/bench/bench_batch.py                    # the H200

One operation is 100 small dispatches (y = a * x + b, tests/kernels/scale_offset.spv, on 1024 float32, `a`
different each dispatch) followed by a wait until they have finished.  Cases (bench/versus.py: interleaved
rounds, ratio of times per operation with its bootstrap 95% interval):

* batch_vs_plain: the 100 dispatches recorded once in a batch and submitted (`device.submit(batch).wait()`)
  against 100 `device.dispatch` calls and `device.synchronize()`; target <= 0.2 (5x faster).
* batch_vs_pyvulkan: the batch re-submitted against pyvulkan re-submitting one pre-recorded command buffer
  holding what the batch records (per dispatch: barrier, bind pipeline, bind descriptor set, push
  constants, dispatch; one barrier at the end), with vkQueueSubmit, vkWaitForFences and vkResetFences;
  target <= 1.1.

The pyvulkan side has its own VkDevice on the same physical device (as bench_dispatch.py's), with its buffers
in device-local memory as ironaccel's are on a GPU.  The device time
of one dispatch, from the batch's timestamps, is reported with the facts.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from harness import Case
from versus import compare, publish, repeat, report

SPV = (Path(__file__).resolve().parents[1] / "tests" / "kernels" / "scale_offset.spv").read_bytes()
N = 1024
B = np.float32(1.0)
UINT64_MAX = 0xFFFFFFFFFFFFFFFF


def scale(k: int) -> np.float32:
    return np.float32(1 + k % 7)


def expected(data: np.ndarray, count: int) -> np.ndarray:
    return scale(count - 1) * data + B  # every dispatch overwrites y: the last one's result stays


class Ours:
    """The ironaccel side: one batch of `count` dispatches, and the same dispatches made one by one."""

    def __init__(self, device: Any, count: int):
        self.device, self.count = device, count
        self.pipeline = device.pipeline(SPV, buffers=2, params=3)
        self.data = np.arange(N, dtype=np.float32)
        self.x, self.y = device.upload(self.data), device.alloc(N)
        self.batch = self._record(False)

    def _record(self, timestamps: bool) -> Any:
        batch = self.device.batch(timestamps=timestamps)
        for k in range(self.count):
            batch.dispatch(self.pipeline, [self.x, self.y], N // 64, (scale(k), B, np.uint32(N)))
        return batch

    def submit(self) -> None:
        self.device.submit(self.batch).wait()

    def plain(self) -> None:
        device, pipeline, buffers = self.device, self.pipeline, [self.x, self.y]
        for k in range(self.count):
            device.dispatch(pipeline, buffers, N // 64, (scale(k), B, np.uint32(N)))
        device.synchronize()

    def check(self, run: Any) -> None:
        self.device.write(self.y, np.zeros(N, np.float32))
        run()
        np.testing.assert_array_equal(self.device.download(self.y), expected(self.data, self.count))

    def dispatch_ns(self) -> float | None:
        """The median device time of one dispatch of the batch (its timestamps), None where it has none."""
        if "timestamps" not in self.device.features:
            return None
        timed = self._record(True)
        spans = [ns for _ in range(5) for ns in self.device.submit(timed).timings(timeout=60).commands_ns]
        timed.close()
        return float(np.median(spans))

    def close(self) -> None:
        self.batch.close()
        self.x.close()
        self.y.close()
        self.pipeline.close()


class Direct:
    """The same work on pyvulkan: one command buffer recorded once (SIMULTANEOUS_USE, as the batch's) and
    re-submitted with a fence."""

    def __init__(self, ordinal: int, count: int):
        import vulkan as vk

        self.vk, self.count = vk, count
        app = vk.VkApplicationInfo(pApplicationName="bench", apiVersion=vk.VK_MAKE_VERSION(1, 1, 0))
        self.instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(pApplicationInfo=app), None)
        self.physical = vk.vkEnumeratePhysicalDevices(self.instance)[ordinal]
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical)
        compute = [i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT]
        dedicated = [i for i in compute if not families[i].queueFlags & vk.VK_QUEUE_GRAPHICS_BIT]
        family = (dedicated or compute)[0]
        self.memprops = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=family, queueCount=1, pQueuePriorities=[1.0])
        self.device = d = vk.vkCreateDevice(self.physical, vk.VkDeviceCreateInfo(pQueueCreateInfos=[queue_info]),
                                            None)
        self.queue = vk.vkGetDeviceQueue(d, family, 0)
        self.pool = vk.vkCreateCommandPool(d, vk.VkCommandPoolCreateInfo(queueFamilyIndex=family), None)
        self.module = vk.vkCreateShaderModule(d, vk.VkShaderModuleCreateInfo(codeSize=len(SPV), pCode=SPV), None)
        bindings = [vk.VkDescriptorSetLayoutBinding(binding=i, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                    descriptorCount=1, stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
                    for i in range(2)]
        self.set_layout = vk.vkCreateDescriptorSetLayout(d, vk.VkDescriptorSetLayoutCreateInfo(pBindings=bindings),
                                                         None)
        push = vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=12)
        self.layout = vk.vkCreatePipelineLayout(d, vk.VkPipelineLayoutCreateInfo(
            pSetLayouts=[self.set_layout], pPushConstantRanges=[push]), None)
        stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=self.module,
                                                   pName="main")
        self.pipeline = vk.vkCreateComputePipelines(d, None, 1, [vk.VkComputePipelineCreateInfo(
            stage=stage, layout=self.layout)], None)[0]
        sizes = [vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=2)]
        self.dpool = vk.vkCreateDescriptorPool(d, vk.VkDescriptorPoolCreateInfo(maxSets=1, pPoolSizes=sizes), None)
        self.data = np.arange(N, dtype=np.float32)
        self.fence = vk.vkCreateFence(d, vk.VkFenceCreateInfo(), None)
        self.fences = [self.fence]
        # x and y device-local, as ironaccel's buffers on a GPU; a host-visible staging buffer fills x and
        # reads y back for the check (the timed work never touches the host)
        self.x, self.y, self.staging = self._buffer(N * 4, False), self._buffer(N * 4, False), self._buffer(N * 4, True)
        np.copyto(self.staging[2], self.data.view(np.uint8))
        self._copy(self.staging[0], self.x[0])
        self.set = vk.vkAllocateDescriptorSets(d, vk.VkDescriptorSetAllocateInfo(
            descriptorPool=self.dpool, descriptorSetCount=1, pSetLayouts=[self.set_layout]))[0]
        writes = [vk.VkWriteDescriptorSet(dstSet=self.set, dstBinding=i, descriptorCount=1,
                                          descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          pBufferInfo=[vk.VkDescriptorBufferInfo(buffer=b, offset=0,
                                                                                 range=UINT64_MAX)])
                  for i, b in enumerate((self.x[0], self.y[0]))]
        vk.vkUpdateDescriptorSets(d, 2, writes, 0, None)
        self.cmd = vk.vkAllocateCommandBuffers(d, vk.VkCommandBufferAllocateInfo(
            commandPool=self.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        self._record()
        self.submit_info = vk.VkSubmitInfo(pCommandBuffers=[self.cmd])

    def _buffer(self, nbytes: int, host: bool) -> tuple[Any, Any, np.ndarray | None]:
        """A storage buffer: device-local memory (the GPU's own where it has it), or host-visible coherent memory,
        mapped."""
        vk = self.vk
        usage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | \
            vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        buf = vk.vkCreateBuffer(self.device, vk.VkBufferCreateInfo(size=nbytes, usage=usage,
                                                                   sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        req = vk.vkGetBufferMemoryRequirements(self.device, buf)
        want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT if host else \
            vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
        index = next(i for i in range(self.memprops.memoryTypeCount)
                     if req.memoryTypeBits >> i & 1 and self.memprops.memoryTypes[i].propertyFlags & want == want)
        mem = vk.vkAllocateMemory(self.device, vk.VkMemoryAllocateInfo(allocationSize=req.size,
                                                                       memoryTypeIndex=index), None)
        vk.vkBindBufferMemory(self.device, buf, mem, 0)
        view = np.frombuffer(vk.vkMapMemory(self.device, mem, 0, nbytes, 0), np.uint8) if host else None
        return buf, mem, view

    def _copy(self, src: Any, dst: Any) -> None:
        """One buffer copy, submitted on its own and waited for (set-up and check only)."""
        vk = self.vk
        cmd = vk.vkAllocateCommandBuffers(self.device, vk.VkCommandBufferAllocateInfo(
            commandPool=self.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo())
        everything = vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT
        access = vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT
        barrier = [vk.VkMemoryBarrier(srcAccessMask=access, dstAccessMask=access)]
        vk.vkCmdPipelineBarrier(cmd, everything, everything, 0, 1, barrier, 0, None, 0, None)
        vk.vkCmdCopyBuffer(cmd, src, dst, 1, [vk.VkBufferCopy(srcOffset=0, dstOffset=0, size=N * 4)])
        vk.vkCmdPipelineBarrier(cmd, everything, everything | vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                                [vk.VkMemoryBarrier(srcAccessMask=access,
                                                    dstAccessMask=access | vk.VK_ACCESS_HOST_READ_BIT)],
                                0, None, 0, None)
        vk.vkEndCommandBuffer(cmd)
        vk.vkQueueSubmit(self.queue, 1, vk.VkSubmitInfo(pCommandBuffers=[cmd]), self.fence)
        vk.vkWaitForFences(self.device, 1, self.fences, vk.VK_TRUE, UINT64_MAX)
        vk.vkResetFences(self.device, 1, self.fences)
        vk.vkFreeCommandBuffers(self.device, self.pool, 1, [cmd])

    def _barrier(self, src_stage: int, src: int, dst_stage: int, dst: int) -> None:
        vk = self.vk
        vk.vkCmdPipelineBarrier(self.cmd, src_stage, dst_stage, 0, 1,
                                [vk.VkMemoryBarrier(srcAccessMask=src, dstAccessMask=dst)], 0, None, 0, None)

    def _record(self) -> None:
        vk, cmd = self.vk, self.cmd
        compute, transfer = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(
            flags=vk.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT))
        for k in range(self.count):
            self._barrier(compute | transfer, vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                          compute, vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)
            vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, self.pipeline)
            vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, self.layout, 0, 1, [self.set], 0,
                                       None)
            params = np.array([scale(k).view(np.uint32), B.view(np.uint32), N], np.uint32).tobytes()
            vk.vkCmdPushConstants(cmd, self.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, 12, vk.ffi.from_buffer(params))
            vk.vkCmdDispatch(cmd, N // 64, 1, 1)
        self._barrier(compute | transfer, vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                      vk.VK_PIPELINE_STAGE_HOST_BIT | transfer | compute,
                      vk.VK_ACCESS_HOST_READ_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
                      | vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)
        vk.vkEndCommandBuffer(cmd)

    def submit(self) -> None:
        vk = self.vk
        vk.vkQueueSubmit(self.queue, 1, self.submit_info, self.fence)
        vk.vkWaitForFences(self.device, 1, self.fences, vk.VK_TRUE, UINT64_MAX)
        vk.vkResetFences(self.device, 1, self.fences)

    def check(self) -> None:
        self.staging[2][:] = 0
        self._copy(self.staging[0], self.y[0])
        self.submit()
        self._copy(self.y[0], self.staging[0])
        np.testing.assert_array_equal(self.staging[2].view(np.float32), expected(self.data, self.count))

    def close(self) -> None:
        vk, d = self.vk, self.device
        vk.vkDeviceWaitIdle(d)
        for buf, mem, _ in (self.x, self.y, self.staging):
            vk.vkDestroyBuffer(d, buf, None)
            vk.vkFreeMemory(d, mem, None)
        vk.vkDestroyFence(d, self.fence, None)
        vk.vkDestroyDescriptorPool(d, self.dpool, None)
        vk.vkDestroyPipeline(d, self.pipeline, None)
        vk.vkDestroyPipelineLayout(d, self.layout, None)
        vk.vkDestroyDescriptorSetLayout(d, self.set_layout, None)
        vk.vkDestroyShaderModule(d, self.module, None)
        vk.vkDestroyCommandPool(d, self.pool, None)
        vk.vkDestroyDevice(d, None)
        vk.vkDestroyInstance(self.instance, None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", type=int, default=0, help="Vulkan physical device (see `python -m ironaccel`)")
    parser.add_argument("--pairs", type=int, default=31, help="rounds per case")
    parser.add_argument("--dispatches", type=int, default=100, help="dispatches per batch")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--no-baseline", action="store_true", help="do not overwrite bench/BASELINE.md")
    args = parser.parse_args(argv)
    if not os.environ.get("XDG_RUNTIME_DIR") or not os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="ironaccel-xdg-")
    from ironaccel_vulkan import Backend

    dev = Backend(validation=False).open(args.device)
    spin = dev._state.timeline.spin
    count = args.dispatches
    ours = Ours(dev, count)
    direct = Direct(args.device, count)
    d = dev.descriptor
    driver = d.extras["driver_info"] or d.extras["driver_version"]
    print(f"device: {d.name} ({d.extras['device_type']}, driver {driver}); {count} dispatches of {N} float32 per "
          "operation", flush=True)
    try:
        per_dispatch = ours.dispatch_ns()
        cases = [
            compare(f"batch{count}_vs_plain{count}", Case(repeat(ours.submit), check=lambda: ours.check(ours.submit)),
                    Case(repeat(ours.plain), check=lambda: ours.check(ours.plain)), rounds=args.pairs, target=0.2),
            compare(f"batch{count}_vs_pyvulkan_resubmit", Case(repeat(ours.submit)),
                    Case(repeat(direct.submit), check=direct.check), rounds=args.pairs, target=1.1),
        ]
    finally:
        ours.close()
        direct.close()
        dev.close()
    facts = {"driver": driver, "dispatches": count, "elements": N,
             "device_ns_per_dispatch": "n/a" if per_dispatch is None else round(per_dispatch, 1),
             "wait_poll_us": round(spin * 1e6),  # submission.ENV_SPIN: a wait polls this long before it blocks
             "first_case": "direct = the same dispatches made one by one with device.dispatch (ironaccel)",
             "second_case": "direct = pyvulkan re-submitting a pre-recorded command buffer with a fence"}
    publish(report("vulkan", d.name, f"pyvulkan {version('vulkan')}", facts, cases), args.json,
            baseline=None if args.no_baseline else Path(__file__).with_name("BASELINE.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
