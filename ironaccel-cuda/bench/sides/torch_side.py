"""Peer: PyTorch's CUDA driver layer (torch.cuda), public API only.

PyTorch cannot launch a foreign CUBIN kernel or do stream-ordered allocation from Python, so those
cells stay blank. Pooled: the caching allocator through `torch.cuda.caching_allocator_alloc/delete`
(its leanest Python entry, no tensor built). Copies: `Tensor.copy_` with non_blocking=False, which
synchronizes the stream itself (so no extra sync is added), on the default stream.
"""

from __future__ import annotations

import numpy as np
from harness import Case

from sides.base import BenchContext, CheckFailed, Side, SideUnavailable


class TorchSide(Side):
    name = "torch"
    label = "PyTorch"

    def open(self, ctx: BenchContext) -> dict[str, str]:
        try:
            import torch
        except ImportError as exc:
            raise SideUnavailable(f"PyTorch is not installed ({exc})") from exc
        if not torch.cuda.is_available():
            raise SideUnavailable("torch.cuda.is_available() is False")
        self.torch = torch
        self.ctx = ctx
        self.device = torch.device("cuda", ctx.device)
        torch.cuda.set_device(self.device)
        self.stream = torch.cuda.Stream(device=self.device)
        return {"torch": torch.__version__, "torch.version.cuda": str(torch.version.cuda)}

    def close(self) -> None:
        self.stream.synchronize()

    def stream_sync(self) -> Case:
        stream = self.stream

        def run(n: int) -> None:
            for _ in range(n):
                stream.synchronize()

        return Case(run, note="torch.cuda.Stream.synchronize()")

    def event_cycle(self) -> Case:
        Event, stream = self.torch.cuda.Event, self.stream

        def run(n: int) -> None:
            for _ in range(n):
                event = Event(enable_timing=False, blocking=False)  # cudaEventCreate happens at first record
                event.record(stream)
                event.synchronize()
                del event

        return Case(run, note="torch.cuda.Event creates lazily on record; destroyed on release")

    def event_reuse(self) -> Case:
        stream = self.stream
        event = self.torch.cuda.Event(enable_timing=False, blocking=False)

        def run(n: int) -> None:
            for _ in range(n):
                event.record(stream)
                event.synchronize()

        return Case(run, note="torch.cuda.Event.record(stream) + synchronize()")

    def pool_alloc(self, nbytes: int) -> Case:
        cuda, stream, device = self.torch.cuda, self.stream, self.ctx.device

        def run(n: int) -> None:
            alloc, free = cuda.caching_allocator_alloc, cuda.caching_allocator_delete
            for _ in range(n):
                free(alloc(nbytes, device, stream))

        def check() -> None:
            ptr = cuda.caching_allocator_alloc(nbytes, device, stream)
            if not ptr:
                raise CheckFailed(f"PyTorch caching_allocator_alloc({nbytes}) returned a null pointer")
            cuda.caching_allocator_delete(ptr)

        return Case(run, settle=stream.synchronize, check=check, note="caching_allocator_alloc/delete")

    def copy_to_new(self, nbytes: int) -> Case:
        torch, host = self.torch, self.ctx.host
        device_tensor = torch.from_numpy(np.ascontiguousarray(host.src[:nbytes])).to(self.device)

        def run(n: int) -> None:
            cpu = device_tensor.cpu
            for _ in range(n):
                cpu()

        return Case(run, check=lambda: host.expect_equal(device_tensor.cpu().numpy(), nbytes, "PyTorch d2h new"),
                    note="Tensor.cpu() (a new tensor, synchronous)")

    def copy(self, direction: str, nbytes: int, pinned: bool) -> Case:
        torch, host = self.torch, self.ctx.host
        device_tensor = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
        if pinned:
            host_tensor = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
            view = host_tensor.numpy()
            view[:] = host.src[:nbytes]
        else:
            view = host.pageable(self.name, direction, nbytes)
            host_tensor = torch.from_numpy(view)
        src, dst = (host_tensor, device_tensor) if direction == "h2d" else (device_tensor, host_tensor)

        def run(n: int) -> None:  # on the default stream, as a plain copy_ runs
            put = dst.copy_
            for _ in range(n):
                put(src)

        def check() -> None:
            if direction == "h2d":
                run(1)
                host.expect_equal(device_tensor.cpu().numpy(), nbytes, "PyTorch h2d")
            else:
                device_tensor.copy_(torch.from_numpy(np.ascontiguousarray(host.src[:nbytes])))
                torch.cuda.synchronize(self.device)
                view[:] = np.bitwise_not(host.src[:nbytes])
                run(1)
                host.expect_equal(view, nbytes, "PyTorch d2h")

        return Case(run, check=check, note="Tensor.copy_(src) (synchronous), preallocated tensor")
