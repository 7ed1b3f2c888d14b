"""The pipe between the proxy's `CaptureClient` and the capture worker: its frames.

See `analyzer.capture.pipeline` for why there are two processes.

The pipe carries a stream of frames, each a tag byte and fixed little-endian fields:

- `C` a streamed chunk: flow id length (u16), flow id, monotonic ns (i64), length (u32), the
  raw bytes. The hottest path of all, so it reads one clock: the sender stamps each shipment
  with a `T` frame, wall clock and monotonic ns (i64 each) read together, and the worker takes
  a chunk's wall clock as its monotonic time plus that offset. The two differ only if the wall
  clock was stepped in the few milliseconds between the chunk and its shipment.
- `P` anything else (request, response, end of stream, unreachable upstream; once per flow):
  a length (u32) and a pickled tuple. Pickle is safe here: our own parent process wrote it.
- `N` counters: records dropped at the full queue and capture errors (u64 each) since the last.
- `R` rotate: close the current capture file and open the next (the proxy got SIGHUP).
- `X` goodbye: the proxy is closing cleanly.
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import IO, Any

__all__ = [
    "CHUNK_TAIL",
    "CLOCK",
    "COUNTERS",
    "EXIT_RECORDS_LOST",
    "FLOW_LEN",
    "LEN",
    "PICKLED",
    "TAG_CHUNK",
    "TAG_CLOCK",
    "TAG_CLOSE",
    "TAG_COUNTERS",
    "TAG_PICKLED",
    "TAG_ROTATE",
    "Item",
    "read_exact",
    "read_frame",
    "write_frame",
]

LEN = struct.Struct("<Q")
FLOW_LEN = struct.Struct("<H")
CHUNK_TAIL = struct.Struct("<qI")  # after a chunk frame's flow id: mono ns, length
PICKLED = struct.Struct("<I")
CLOCK = struct.Struct("<qq")
COUNTERS = struct.Struct("<QQ")
TAG_CHUNK, TAG_PICKLED, TAG_CLOCK, TAG_COUNTERS, TAG_ROTATE, TAG_CLOSE = b"CPTNRX"
# The worker's exit status when its writer gave records up after failed writes.
EXIT_RECORDS_LOST = 3

Item = tuple[Any, ...]


def write_frame(pipe: IO[bytes], obj: object) -> None:
    """The configuration, the first thing on the pipe: a length and a pickle."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.write(LEN.pack(len(data)))
    pipe.write(data)
    pipe.flush()


def read_exact(fd: int, size: int) -> bytes:
    data = b""
    while len(data) < size:
        piece = os.read(fd, size - len(data))
        if not piece:
            break
        data += piece
    return data


def read_frame(fd: int) -> Any:
    """The configuration: read from the file descriptor itself, so nothing is buffered."""
    head = read_exact(fd, LEN.size)
    if len(head) < LEN.size:
        return None
    (size,) = LEN.unpack(head)
    data = read_exact(fd, size)
    if len(data) < size:
        return None
    return pickle.loads(data)  # our own parent process wrote it
