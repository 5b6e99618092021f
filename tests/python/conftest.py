"""Shared fixtures for the worker's CPU tests.

Tests run under Debian's python3-torch (`/usr/bin/python3 -m pytest tests/python`).
`worker_server` starts one `python -m mkevolve_worker serve --test-mode` for
the whole session (torch is imported once; every candidate is a fork).
"""

from __future__ import annotations

import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "fixtures"))

from worker_client import (FIXTURES, REPO, WORKER_DIR, WorkerClient, cand, problem,  # noqa: E402,F401
                           worker_env, worker_python)

if WORKER_DIR not in sys.path:
    sys.path.insert(0, WORKER_DIR)


@pytest.fixture(scope="session")
def worker_server(tmp_path_factory):
    """A test-mode server whose own environment holds a planted secret."""
    cwd = str(tmp_path_factory.mktemp("server-cwd"))
    lock = str(tmp_path_factory.mktemp("locks") / "timing.lock")
    client = WorkerClient(["--test-mode"], extra_env={"FOO_API_KEY": "sk-planted-secret-123456",
                                                      "MKEVOLVE_TIMING_LOCK": lock}, cwd=cwd)
    client.cwd = cwd
    client.timing_lock = lock
    yield client
    client.close()
