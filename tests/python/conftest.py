"""Shared fixtures for the worker's CPU tests.

Tests run under Debian's python3-torch (`/usr/bin/python3 -m pytest tests/python`).
`worker_server` starts one `python -m mkevolve_worker serve --test-mode` for
the whole session (torch is imported once; every candidate is a fork).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER_DIR = os.path.join(REPO, "worker")
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")

if WORKER_DIR not in sys.path:
    sys.path.insert(0, WORKER_DIR)


def worker_python() -> str:
    return os.environ.get("MKEVOLVE_TEST_PYTHON") or sys.executable


def problem(name: str) -> str:
    return os.path.join(FIXTURES, "problems", name + ".py")


def cand(name: str) -> str:
    return os.path.join(FIXTURES, "cands", name + ".py")


def worker_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = WORKER_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


class WorkerClient:
    """Talks protocol v1 to a worker server subprocess."""

    def __init__(self, args=(), extra_env=None, cwd=None):
        self.stderr_path = os.path.join(cwd or "/tmp", f"worker-stderr-{os.getpid()}-{id(self)}.txt")
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen([worker_python(), "-m", "mkevolve_worker", "serve", *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     env=worker_env(extra_env), cwd=cwd)
        self._buf = b""
        self._next_id = 1
        self.hello = self.read(timeout=120)

    def read(self, timeout: float = 120):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no message from the worker in time; stderr:\n" + self.stderr())
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise EOFError("worker closed its stdout; stderr:\n" + self.stderr())
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def request(self, op: str, timeout: float = 120, **fields):
        """Returns (final message, progress messages)."""
        rid = self._next_id
        self._next_id += 1
        self.send_raw((json.dumps({"id": rid, "op": op, **fields}) + "\n").encode())
        progress = []
        while True:
            msg = self.read(timeout)
            assert msg.get("id") == rid, f"answer for another request: {msg}"
            if msg["type"] == "progress":
                progress.append(msg)
                continue
            assert msg["type"] in ("result", "error"), msg
            return msg, progress

    def eval(self, prob: str, kernel: str, timeout: float = 120, **options):
        opts = {"test_cpu": True, "perf": False}
        opts.update(options)
        msg, _ = self.request("eval", timeout=timeout, problem=prob, kernel=kernel, options=opts)
        assert msg["type"] == "result", msg
        return msg

    def stderr(self) -> str:
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-4000:]
        except OSError:
            return ""

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.request("shutdown", timeout=30)
            except (EOFError, TimeoutError, BrokenPipeError, AssertionError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()
        try:
            os.unlink(self.stderr_path)
        except OSError:
            pass


@pytest.fixture(scope="session")
def worker_server(tmp_path_factory):
    """A test-mode server whose own environment holds a planted secret."""
    cwd = str(tmp_path_factory.mktemp("server-cwd"))
    client = WorkerClient(["--test-mode"], extra_env={"FOO_API_KEY": "sk-planted-secret-123456"}, cwd=cwd)
    client.cwd = cwd
    yield client
    client.close()
