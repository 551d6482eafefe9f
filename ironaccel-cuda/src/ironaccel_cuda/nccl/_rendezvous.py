"""Hand an NCCL unique id from rank 0 to every other rank over one TCP port, with a deadline.

Rank 0 listens on all interfaces at `port` and answers each other rank once; the others connect to
`(host, port)`, retrying until rank 0 is up.  A request names the protocol, a tag (which exchange of
the job this is: every rank counts its exchanges alike), the world size and the asking rank; rank 0
checks them and answers with the 128-byte id, or with a status saying what did not match.  Nothing
else travels, and a connection that does not speak the protocol is dropped without an answer.

Launchers such as torchrun host their own store on MASTER_PORT, so `Communicator.from_env` uses
MASTER_PORT + 1 unless IRONACCEL_NCCL_PORT says otherwise.
"""

from __future__ import annotations

import socket
import struct
import time

from ..errors import BACKEND, InvalidArgument
from ._binding import CollectiveTimeout

__all__ = ["exchange", "ID_BYTES"]

ID_BYTES = 128
MAGIC = b"IANC"
VERSION = 1
_REQUEST = struct.Struct("!4sBQII")  # magic, version, tag, world size, rank
_REPLY = struct.Struct(f"!4sB{ID_BYTES}s")  # magic, status, id
OK, WORLD_MISMATCH, BAD_RANK, DUPLICATE_RANK, TAG_MISMATCH = range(5)
_STATUS_TEXT = {
    WORLD_MISMATCH: "rank 0 runs with another WORLD_SIZE",
    BAD_RANK: "rank 0 rejected this RANK (out of range)",
    DUPLICATE_RANK: "another process already asked as this RANK",
    TAG_MISMATCH: "rank 0 is at another rendezvous of this job (the ranks created communicators in different orders)",
}
OP = "rendezvous"


def exchange(payload: bytes | None, *, rank: int, world: int, host: str, port: int, timeout: float | None,
             tag: int = 0) -> bytes:
    """Rank 0 passes `payload` (ID_BYTES bytes) and serves it; any other rank passes None and receives it."""
    deadline = None if timeout is None else time.monotonic() + timeout
    if rank == 0:
        if payload is None or len(payload) != ID_BYTES:
            raise InvalidArgument(BACKEND, OP, detail=f"rank 0 must pass the {ID_BYTES}-byte id")
        _serve(payload, world, port, tag, deadline, timeout)
        return payload
    return _ask(rank, world, host, port, tag, deadline, timeout)


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _serve(payload: bytes, world: int, port: int, tag: int, deadline: float | None, timeout: float | None) -> None:
    waiting = set(range(1, world))
    if not waiting:
        return
    try:
        server = socket.create_server(("", port), family=socket.AF_INET, backlog=min(world, 1024))
    except OSError as exc:
        raise InvalidArgument(BACKEND, OP, detail=f"rank 0 cannot listen on port {port}: {exc}; set "
                              "IRONACCEL_NCCL_PORT (or MASTER_PORT) to a free port") from None
    with server:
        while waiting:
            left = _remaining(deadline)
            if left is not None and left <= 0:
                missing = sorted(waiting)
                raise CollectiveTimeout(BACKEND, OP, detail=f"rank 0 waited {timeout} s on port {port}; ranks "
                                        f"{missing[:16]}{' ...' if len(missing) > 16 else ''} never asked for the id")
            server.settimeout(min(left, 1.0) if left is not None else 1.0)
            try:
                conn, _ = server.accept()
            except (TimeoutError, InterruptedError):
                continue
            with conn:
                served = _answer(conn, payload, world, tag, waiting)
            if served is not None:
                waiting.discard(served)


def _answer(conn: socket.socket, payload: bytes, world: int, tag: int, waiting: set[int]) -> int | None:
    """Answer one request; the rank it served, or None."""
    conn.settimeout(5.0)
    try:
        data = _recv_exact(conn, _REQUEST.size)
    except OSError:
        return None
    if data is None:
        return None
    magic, version, their_tag, their_world, their_rank = _REQUEST.unpack(data)
    if magic != MAGIC or version != VERSION:
        return None
    if their_world != world:
        status = WORLD_MISMATCH
    elif not 0 < their_rank < world:
        status = BAD_RANK
    elif their_tag != tag:
        status = TAG_MISMATCH
    elif their_rank not in waiting:
        status = DUPLICATE_RANK
    else:
        status = OK
    try:
        conn.sendall(_REPLY.pack(MAGIC, status, payload if status == OK else bytes(ID_BYTES)))
    except OSError:
        return None
    return their_rank if status == OK else None


def _ask(rank: int, world: int, host: str, port: int, tag: int, deadline: float | None,
         timeout: float | None) -> bytes:
    last: Exception | None = None
    while True:
        left = _remaining(deadline)
        if left is not None and left <= 0:
            raise CollectiveTimeout(BACKEND, OP, detail=f"rank {rank} found no rank 0 at {host}:{port} within "
                                    f"{timeout} s (last error: {last})")
        try:
            with socket.create_connection((host, port), timeout=min(left, 2.0) if left is not None else 2.0) as conn:
                conn.settimeout(min(left, 10.0) if left is not None else 10.0)
                conn.sendall(_REQUEST.pack(MAGIC, VERSION, tag, world, rank))
                data = _recv_exact(conn, _REPLY.size)
        except UnicodeError as exc:  # the host name cannot be encoded (IDNA): no retry can reach it
            raise InvalidArgument(BACKEND, OP, detail=f"MASTER_ADDR {host!r} is not a valid host name: {exc}") from None
        except OSError as exc:  # refused (rank 0 not listening yet), reset, timed out
            last = exc
            time.sleep(0.05)
            continue
        if data is None:
            last = ConnectionError("rank 0 closed the connection without answering")
            time.sleep(0.05)
            continue
        magic, status, payload = _REPLY.unpack(data)
        if magic != MAGIC:
            raise InvalidArgument(BACKEND, OP, detail=f"{host}:{port} is not an ironaccel NCCL rendezvous")
        if status != OK:
            raise InvalidArgument(BACKEND, OP, detail=f"rank {rank}, WORLD_SIZE {world}: "
                                  f"{_STATUS_TEXT.get(status, f'status {status}')}")
        return bytes(payload)


def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = conn.recv(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
