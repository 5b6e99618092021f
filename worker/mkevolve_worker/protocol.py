"""Worker protocol v1: JSON lines on stdin/stdout (docs/ARCHITECTURE.md).

The server claims the real stdout for protocol lines at start and points fd 1
at stderr, so a stray print() anywhere (in the worker, in torch, in a
problem file) cannot corrupt the channel. Lines are written with os.write on
the private descriptor, never through a Python buffer that a fork would copy.
"""

from __future__ import annotations

import json
import math
import os
import sys

PROTOCOL_VERSION = 1
MAX_LINE = 16 << 20


def _jsonable(obj):
    """JSON has no NaN/Infinity: turn them into null; tuples into lists."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def dumps(obj) -> str:
    return json.dumps(_jsonable(obj), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class Channel:
    """The server's end of the protocol."""

    def __init__(self, in_fd: int, out_fd: int):
        self.in_fd = in_fd
        self.out_fd = out_fd
        self._buf = b""
        self._eof = False

    @classmethod
    def claim_stdio(cls) -> "Channel":
        """Moves protocol stdout to a private fd and sends fd 1 to stderr."""
        sys.stdout.flush()
        out_fd = os.dup(1)
        in_fd = os.dup(0)
        os.set_inheritable(out_fd, False)
        os.set_inheritable(in_fd, False)
        os.dup2(2, 1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        return cls(in_fd, out_fd)

    def send(self, obj: dict) -> None:
        data = (dumps(obj) + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            n = os.write(self.out_fd, view)
            view = view[n:]

    def read_line(self):
        """Returns the next line (bytes, without newline) or None at end of input."""
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line, self._buf = self._buf[:nl], self._buf[nl + 1:]
                return line
            if self._eof:
                if self._buf:
                    line, self._buf = self._buf, b""
                    return line
                return None
            chunk = os.read(self.in_fd, 1 << 20)
            if not chunk:
                self._eof = True
                continue
            self._buf += chunk
            if len(self._buf) > MAX_LINE and b"\n" not in self._buf:
                # Drop an absurdly long line rather than grow without bound.
                self._buf = b""
                return b"\x00oversized"
