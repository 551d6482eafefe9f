"""The C floor: floor.c built with nvcc at bench time, run as a child process in --serve mode.

Each batch is one request line; the child times its own n driver calls and answers the
nanoseconds, so the pipe is not in the figure. It is sampled in the same interleaved rounds
as the Python sides (the child sits idle on its pipe while a Python side runs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from harness import Case

from sides.base import BenchContext, CheckFailed, Side, SideUnavailable, Unsupported

FLOOR_SOURCE = Path(__file__).resolve().parent.parent / "floor.c"


def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and Path(home, "bin", "nvcc").is_file():
            return str(Path(home, "bin", "nvcc"))
    return None


def driver_libraries() -> list[str]:
    """Paths of libcuda.so.1 that the dynamic loader knows (`ldconfig -p`), for linking when -lcuda finds none."""
    try:
        listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.split("=>")[-1].strip() for line in listing.splitlines() if "libcuda.so.1 " in line and "=>" in line]


def build_floor(workdir: Path, nvcc: str | None = None, source: Path = FLOOR_SOURCE) -> tuple[Path, str]:
    """Compile floor.c; returns (binary, nvcc version line).

    Links with -lcuda, else against the toolkit's stub library, else against the driver's own
    libcuda.so.1 (the binary loads the real driver at run time in every case)."""
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise SideUnavailable("nvcc not found (PATH, CUDA_HOME, /usr/local/cuda)")
    binary = workdir / "floor"
    base = [nvcc, "-O2", "-o", str(binary), str(source)]
    roots = [Path(nvcc).resolve().parent.parent, Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))]
    stubs = {root / sub for root in roots for sub in ("lib64/stubs", "targets/x86_64-linux/lib/stubs")}
    attempts = [base + ["-lcuda"]] + [base + [f"-L{folder}", "-lcuda"] for folder in sorted(stubs) if folder.is_dir()]
    attempts += [base + [library] for library in driver_libraries()[:2]]
    errors = []
    for command in attempts:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode == 0:
            version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip()
            return binary, version.splitlines()[-1] if version else "?"
        errors.append(f"{' '.join(command)}: {done.stderr.strip()[-400:]}")
    raise SideUnavailable("could not build floor.c: " + " | ".join(errors))


class FloorError(RuntimeError):
    """The floor child reported a failed driver call or died."""


class FloorProcess:
    """The --serve child: one request, one JSON answer."""

    def __init__(self, binary: Path, cubin_path: Path):
        self.proc = subprocess.Popen(
            [str(binary), str(cubin_path), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def request(self, op: str, arg: int, n: int) -> dict:
        if self.proc.poll() is not None:
            raise FloorError(f"floor exited with {self.proc.returncode}: {self.proc.stderr.read()[-400:]}")
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{op} {arg} {n}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=5)
            raise FloorError(f"floor exited with {self.proc.returncode}: {self.proc.stderr.read()[-400:]}")
        answer = json.loads(line)
        if "error" in answer:
            raise FloorError(f"floor: {answer['error']} failed: {answer.get('name')} ({answer.get('code')})")
        return answer

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit 0 0\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


class FloorSide(Side):
    name = "floor"
    label = "C floor"

    def __init__(self, binary: Path | None = None):
        self._binary = binary

    def open(self, ctx: BenchContext) -> dict[str, str]:
        version = "prebuilt"
        if self._binary is None:
            self._binary, version = build_floor(ctx.workdir)
        self.process = FloorProcess(self._binary, ctx.cubin_path)
        answer = self.process.request("check", 0, 1)
        if not answer.get("ok"):
            self.process.close()
            raise SideUnavailable(f"floor self-check failed: {answer.get('problem')}")
        return {"nvcc": version}

    def close(self) -> None:
        self.process.close()

    def _case(self, op: str, arg: int = 0, max_batch: int = 1_000_000) -> Case:
        request = self.process.request

        def run(n: int) -> int:
            return int(request(op, arg, n)["ns"])

        return Case(run, max_batch=max_batch, note=f"floor.c {op}")

    def stream_sync(self) -> Case:
        return self._case("sync")

    def event_cycle(self) -> Case:
        return self._case("event_cycle")

    def event_reuse(self) -> Case:
        return self._case("event_reuse")

    def stream_alloc(self, nbytes: int) -> Case:
        return self._case("alloc", nbytes)

    def pool_alloc(self, nbytes: int) -> Case:
        case = self._case("alloc", nbytes)
        case.note = "cuMemAllocAsync/cuMemFreeAsync (the driver's pool)"
        return case

    def copy(self, direction: str, nbytes: int, pinned: bool) -> Case:
        return self._case(f"{direction}_pinned" if pinned else direction, nbytes)

    def copy_d2d(self, nbytes: int) -> Case:
        return self._case("d2d", nbytes)

    def launch(self, nargs: int) -> Case:
        if nargs not in (4, 16):
            raise Unsupported(f"floor has no {nargs}-argument kernel")
        return self._case(f"launch{nargs}")

    def eager_launches(self, count: int) -> Case:
        return self._case("eager", count)

    def graph_replay(self, count: int) -> Case:
        case = self._case("graph", count)

        def check() -> None:
            if not self.process.request("check", 0, 1).get("ok"):
                raise CheckFailed("floor: self-check failed")

        case.check = check
        return case
