"""NCCL collectives through ironaccel_cuda.nccl against PyTorch's torch.distributed (NCCL backend), same GPUs.

    python3 ironaccel-cuda/bench/bench_nccl.py                      # one process per GPU, every GPU here
    python3 ironaccel-cuda/bench/bench_nccl.py --nprocs 2 --quick   # smoke run
    python3 ironaccel-cuda/bench/bench_nccl.py --json nccl.json     # every figure, versions, devices

Run without RANK in the environment it is the launcher: it starts one worker per GPU with torchrun's
variables and NVLink multicast off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1); under torchrun each process is a worker already.  Both sides run the same
libnccl in the same processes (torch loads it; nccl4py finds the loaded one).

Rows: all_reduce, all_gather, reduce_scatter, broadcast and reduce of float32 at 1 MiB to 1 GiB
(the size is the largest buffer, as nccl-tests counts it: all_gather's output, reduce_scatter's
input).  all_reduce, broadcast and reduce run in place on both sides (torch's API is in place),
all_gather and reduce_scatter out of place.  Sides: `ironaccel` (Device.alloc buffers, a stream of
its own), `ironaccel+reg` (ncclMemAlloc buffers registered with ncclCommRegister) and `torch`
(tensors from its caching allocator, its own NCCL stream).  A *batch* is k back-to-back calls then a
stream synchronize, timed on rank 0 after an untimed barrier; k is chosen once per row so a batch
takes about --batch-ms, and shared by every rank and side.  Rounds rotate the order of the sides
(harness.rotation).  Bus bandwidth as nccl-tests defines it: algbw = size / time per call, busbw =
algbw x 2(n-1)/n for all_reduce, x (n-1)/n for all_gather and reduce_scatter, x 1 for broadcast and
reduce.  The ratio per round is torch's time over ironaccel's (above 1: ironaccel faster), reported
as the median with a 95% bootstrap interval (harness.bootstrap_median); the issue's target is
ironaccel within 1.05x of torch: PASS when the whole interval is above 1/1.05.

The call-overhead row (an 8-byte all_reduce, host time per call with k calls queued, then one
synchronize) also runs on one GPU: there it is the only row, because with one rank the bus
bandwidth of every collective is zero or a local copy.  It adds a third column, the nccl4py call
that ironaccel makes underneath (`nccl.bindings.nccl.all_reduce` with integers), the floor of any
Python wrapper.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import paths

paths.ensure_import_paths()

from harness import bootstrap_median, rotation, verdict  # noqa: E402

MiB = 1 << 20
SIZES = (1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, 1024 * MiB)
QUICK_SIZES = (1 * MiB, 16 * MiB, 256 * MiB, 1024 * MiB)
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
TARGET = 1.05
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def bus_factor(name: str, n: int) -> float:
    if name == "all_reduce":
        return 2 * (n - 1) / n
    if name in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    return 1.0


def human(nbytes: int) -> str:
    return f"{nbytes // MiB} MiB" if nbytes < 1024 * MiB else f"{nbytes // (1024 * MiB)} GiB"


# -- the launcher -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(args: argparse.Namespace) -> int:
    n = args.nprocs
    if n is None:
        import ironaccel_cuda as cu

        n = cu.device_count()
    env = paths.child_environment({**NO_MULTICAST, "WORLD_SIZE": str(n), "MASTER_ADDR": "127.0.0.1",
                                   "MASTER_PORT": str(free_port()), "IRONACCEL_NCCL_PORT": str(free_port()),
                                   "PYTHONUNBUFFERED": "1"})
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), *sys.argv[1:]],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r))) for r in range(n)]
    codes = [p.wait() for p in procs]
    if any(codes):
        print(f"bench_nccl: workers exited with {codes}", file=sys.stderr)
        return 1
    return 0


# -- a worker ------------------------------------------------------------------------------------


class Worker:
    def __init__(self, args: argparse.Namespace):
        for key, value in NO_MULTICAST.items():
            os.environ.setdefault(key, value)
        self.rank, self.n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local = int(os.environ.get("LOCAL_RANK", self.rank))
        torch: Any = None
        dist: Any = None
        missing = None
        try:  # first, so that nccl4py finds the libnccl that torch loaded
            import torch
            import torch.distributed as dist
        except ImportError as exc:
            missing = f"torch side not measured: {exc}"
        if torch is not None:
            torch.cuda.set_device(local)
            dist.init_process_group("nccl", rank=self.rank, world_size=self.n, device_id=torch.device("cuda", local))

        import ironaccel_cuda as cu
        from ironaccel_cuda import nccl

        self.args = args
        self.torch, self.dist, self.nccl = torch, dist, nccl
        self.dev = cu.Device(local)
        self.stream = self.dev.create_stream()
        self.comm = nccl.Communicator.from_env(stream=self.stream, timeout=300)
        self.flag = self.dev.alloc(1, "int64", stream=self.stream)
        self.facts: dict[str, Any] = {
            "world": self.n, "device": self.dev.name, "ironaccel nccl": ".".join(map(str, nccl.version())),
            "torch": torch.__version__ if torch else missing,
            "torch nccl": ".".join(map(str, torch.cuda.nccl.version())) if torch else "-",
            "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE"),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }

    def barrier(self) -> None:
        self.comm.all_reduce(self.flag)
        self.stream.synchronize()

    def agree(self, value: int) -> int:
        """Rank 0's value on every rank."""
        self.flag.copy_from(np.array([value], np.int64))
        self.comm.broadcast(self.flag, root=0)
        self.stream.synchronize()
        return int(self.flag.copy_to_host()[0])

    def timed(self, fn: Callable[[], None], sync: Callable[[], None], k: int) -> float:
        self.barrier()
        start = time.perf_counter_ns()
        for _ in range(k):
            fn()
        sync()
        return (time.perf_counter_ns() - start) / k

    # -- sides of one row ---------------------------------------------------------------

    def counts(self, nbytes: int) -> tuple[int, int]:
        """(elements of the large buffer, elements per rank): a multiple of the world size, as nccl-tests rounds."""
        per = nbytes // 4 // self.n
        return per * self.n, per

    def ironaccel_case(self, name: str, nbytes: int, registered: bool) -> tuple[Callable[[], None], Callable[[], None],
                                                                                  Callable[[], None]]:
        count, per = self.counts(nbytes)
        nccl, dev, comm, s = self.nccl, self.dev, self.comm, self.stream
        sizes = {"all_gather": (per, count), "reduce_scatter": (count, per)}.get(name, (count, None))
        bufs = []
        regs = []
        for size in sizes:
            if size is None:
                continue
            buf = nccl.alloc(dev, size, "float32") if registered else dev.alloc(size, "float32", stream=s)
            buf.memset(0)
            bufs.append(buf)
            if registered:
                regs.append(comm.register(buf))
        a = bufs[0]
        b = bufs[1] if len(bufs) > 1 else None
        call: Callable[[], None] = {
            "all_reduce": lambda: comm.all_reduce(a),
            "all_gather": lambda: comm.all_gather(a, b),
            "reduce_scatter": lambda: comm.reduce_scatter(a, b),
            "broadcast": lambda: comm.broadcast(a, root=0),
            "reduce": lambda: comm.reduce(a, root=0),
        }[name]

        def close() -> None:
            for r in regs:
                r.close()
            for x in bufs:
                x.close()

        return call, s.synchronize, close

    def torch_case(self, name: str, nbytes: int) -> tuple[Callable[[], None], Callable[[], None], Callable[[], None]]:
        torch, dist = self.torch, self.dist
        count, per = self.counts(nbytes)
        dev = torch.device("cuda", torch.cuda.current_device())
        if name == "all_gather":
            a, b = torch.zeros(per, device=dev), torch.zeros(count, device=dev)
            call = lambda: dist.all_gather_into_tensor(b, a)  # noqa: E731
        elif name == "reduce_scatter":
            a, b = torch.zeros(count, device=dev), torch.zeros(per, device=dev)
            call = lambda: dist.reduce_scatter_tensor(b, a)  # noqa: E731
        else:
            a = torch.zeros(count, device=dev)
            call = {"all_reduce": lambda: dist.all_reduce(a), "broadcast": lambda: dist.broadcast(a, src=0),
                    "reduce": lambda: dist.reduce(a, dst=0)}[name]
        return call, torch.cuda.current_stream().synchronize, lambda: None  # tensors go with the closures

    def raw_case(self) -> tuple[Callable[[], None], Callable[[], None], Callable[[], None]]:
        """nccl4py's all_reduce with integers: the call ironaccel's all_reduce makes, and nothing else."""
        import nccl.bindings.nccl as nb

        buf = self.dev.alloc(2, "float32", stream=self.stream)
        buf.memset(0)
        handle, ptr, sh = nb.Comm(self.comm.handle), buf.ptr, self.stream.handle
        fn = nb.all_reduce
        return (lambda: fn(ptr, ptr, 2, 7, 0, handle, sh)), self.stream.synchronize, buf.close

    # -- one row -------------------------------------------------------------------------

    def row(self, title: str, sides: dict[str, tuple[Callable[[], None], Callable[[], None], Callable[[], None]]],
            rounds: int, max_batch: int | None = None) -> dict[str, Any]:
        labels = list(sides)
        for fn, sync, _ in sides.values():  # warm-up: connections, registration, allocator
            for _ in range(3):
                fn()
            sync()
        first = sides["ironaccel"]
        probe = self.timed(first[0], first[1], 1)
        most = self.args.max_batch if max_batch is None else max_batch
        k = self.agree(int(min(most, max(1, round(self.args.batch_ms * 1e6 / max(probe, 1.0))))))
        times = np.full((rounds, len(labels)), np.nan)
        for r in range(rounds):
            for i in rotation(len(labels), r):
                fn, sync, _ = sides[labels[i]]
                times[r, i] = self.timed(fn, sync, k)
        for _, _, close in sides.values():
            close()
        return {"title": title, "labels": labels, "k": k, "ns": times}

    def run(self) -> None:
        args, out = self.args, []
        rounds = 5 if args.quick else args.rounds
        overhead = {"ironaccel": self.overhead_ironaccel(), "nccl4py": self.raw_case()}
        if self.torch is not None:
            overhead["torch"] = self.overhead_torch()
        # at most 512 calls queued: past CUDA's launch queue the host would wait for the GPU instead
        row = self.row("call overhead, 8 B all_reduce", overhead, rounds, max_batch=512)
        out.append(row | {"kind": "overhead", "bytes": 8})
        if self.n > 1 and self.torch is not None:
            sizes = QUICK_SIZES if args.quick else SIZES
            for name in args.only or COLLECTIVES:
                for nbytes in sizes:
                    sides = {"ironaccel": self.ironaccel_case(name, nbytes, False)}
                    if not args.no_register:
                        try:
                            sides["ironaccel+reg"] = self.ironaccel_case(name, nbytes, True)
                        except Exception as exc:  # every rank fails alike: the side is left out of the row
                            self.facts.setdefault("registration errors", []).append(f"{name} {human(nbytes)}: {exc}")
                    sides["torch"] = self.torch_case(name, nbytes)
                    res = self.row(f"{name} {human(nbytes)}", sides, rounds)
                    out.append(res | {"kind": "bandwidth", "collective": name, "bytes": nbytes})
                    self.torch.cuda.empty_cache()
        if self.rank == 0:
            report(out, self.facts, self.n, args)
        self.comm.close()
        if self.dist is not None:
            self.dist.destroy_process_group()

    def overhead_ironaccel(self) -> tuple[Callable[[], None], Callable[[], None], Callable[[], None]]:
        buf = self.dev.alloc(2, "float32", stream=self.stream)
        buf.memset(0)
        comm = self.comm
        return (lambda: comm.all_reduce(buf)), self.stream.synchronize, buf.close

    def overhead_torch(self) -> tuple[Callable[[], None], Callable[[], None], Callable[[], None]]:
        torch, dist = self.torch, self.dist
        t = torch.zeros(2, device=torch.device("cuda", torch.cuda.current_device()))
        return (lambda: dist.all_reduce(t)), torch.cuda.current_stream().synchronize, (lambda: None)


# -- the report --------------------------------------------------------------------------------


def report(rows: list[dict[str, Any]], facts: dict[str, Any], n: int, args: argparse.Namespace) -> None:
    bar = 1 / TARGET
    lines = [f"# NCCL collectives: ironaccel_cuda.nccl vs torch.distributed (NCCL), {n} x {facts['device']}", "",
             ", ".join(f"{k} {v}" for k, v in facts.items()), ""]
    if n == 1:
        lines += ["needs 2+ GPUs: with one rank every collective is a local copy and all_reduce's bus bandwidth is "
                  "0 by definition, so only the call-overhead row ran; run on a machine with two or more GPUs for "
                  "the bandwidth rows", ""]
    overhead = [r for r in rows if r["kind"] == "overhead"]
    for r in overhead:
        med = {label: float(np.median(r["ns"][:, i])) for i, label in enumerate(r["labels"])}
        ia = r["ns"][:, r["labels"].index("ironaccel")]
        lines += [f"## {r['title']} ({r['k']} calls per batch, {len(ia)} rounds; host ns per call)", "",
                  "| side | median ns | time / ironaccel time (95% interval) |", "|---|---:|---|"]
        for i, label in enumerate(r["labels"]):
            iv = bootstrap_median(r["ns"][:, i] / ia, seed=i)
            lines.append(f"| {label} | {med[label]:,.0f} | {iv.median:.2f}x [{iv.low:.2f}, {iv.high:.2f}] |")
        lines.append("")
    bands = [r for r in rows if r["kind"] == "bandwidth"]
    verdicts = []
    if bands:
        lines += ["## Bus bandwidth (GB/s, median over rounds) and torch time / ironaccel time", "",
                  "| row | ironaccel | ironaccel+reg | torch | torch/ironaccel (95% interval) | reg/plain | target |",
                  "|---|---:|---:|---:|---|---|---|"]
        for r in bands:
            labels, ns = r["labels"], r["ns"]
            f = bus_factor(r["collective"], n)
            bw = {label: r["bytes"] * f / float(np.median(ns[:, i])) for i, label in enumerate(labels)}
            ia = ns[:, labels.index("ironaccel")]
            iv = bootstrap_median(ns[:, labels.index("torch")] / ia)
            status = {"win": "PASS", "loss": "FAIL", "parity": "unresolved"}[verdict(iv, bar)]
            verdicts.append(status)
            reg = "-"
            if "ironaccel+reg" in labels:
                rv = bootstrap_median(ia / ns[:, labels.index("ironaccel+reg")])
                reg = f"{rv.median:.3f}x [{rv.low:.3f}, {rv.high:.3f}]"
            lines.append(f"| {r['title']} | {bw['ironaccel']:.1f} | {bw.get('ironaccel+reg', float('nan')):.1f} | "
                         f"{bw['torch']:.1f} | {iv.median:.3f} [{iv.low:.3f}, {iv.high:.3f}] | {reg} | {status} |")
        lines += ["", f"Target: ironaccel within {TARGET}x of torch, i.e. torch/ironaccel above {bar:.3f} over the "
                  "whole interval (PASS); FAIL when the whole interval is below; unresolved otherwise.  reg/plain: "
                  "plain ironaccel time over registered-buffer time (above 1: registration pays).",
                  f"Targets: {verdicts.count('PASS')} PASS, {verdicts.count('FAIL')} FAIL, "
                  f"{verdicts.count('unresolved')} unresolved of {len(verdicts)}", ""]
    print("\n".join(lines), flush=True)
    if args.json:
        data = {"facts": facts, "rows": [{**{k: v for k, v in r.items() if k != "ns"}, "ns": r["ns"].tolist()}
                                         for r in rows]}
        Path(args.json).write_text(json.dumps(data, indent=1))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nprocs", type=int, default=None, help="workers (one per GPU); default: every GPU")
    p.add_argument("--quick", action="store_true", help="5 rounds, 4 sizes")
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--batch-ms", type=float, default=20.0, help="aim of one timed batch")
    p.add_argument("--max-batch", type=int, default=2000)
    p.add_argument("--only", nargs="*", choices=COLLECTIVES, help="collectives to run (default: all)")
    p.add_argument("--no-register", action="store_true", help="leave out the ironaccel+reg side")
    p.add_argument("--json", help="write every figure here (rank 0)")
    return p.parse_args(argv)


def main() -> int:
    args = parse()
    if "RANK" not in os.environ:
        return launch(args)
    Worker(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
