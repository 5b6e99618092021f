"""Shared fixtures for the worker's CPU tests.

Tests run under Debian's python3-torch (`/usr/bin/python3 -m pytest tests/python`).
`worker_server` starts one `python -m mkevolve_worker serve --test-mode` for
the whole session (torch is imported once; every candidate is a fork).
"""

from __future__ import annotations

import os
import re
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "fixtures"))

from worker_client import (FIXTURES, REFERENCE_DIES_ON_SECOND_INPUTS,  # noqa: E402,F401
                           REFERENCE_OUT_OF_MEMORY_ON_SECOND_FORWARD, REPO, WORKER_DIR, WorkerClient, cand, problem,
                           worker_env, worker_python, write_source)

if WORKER_DIR not in sys.path:
    sys.path.insert(0, WORKER_DIR)


@pytest.fixture(autouse=True)
def _spare_the_test_servers(monkeypatch):
    """A test that forks isolation children in the test process itself ends
    them with isolation.kill_descendants, which kills every descendant of
    this process: the session's worker servers too, so that the next file's
    tests found theirs dead (a broken pipe) when several files ran in one
    pytest. They are spared, as the server spares its idle spares."""
    from mkevolve_worker import isolation
    orig = isolation.kill_descendants

    def spare(protect=frozenset(), *args, **kwargs):
        return orig(frozenset(protect) | WorkerClient.live_server_pids(), *args, **kwargs)
    monkeypatch.setattr(isolation, "kill_descendants", spare)


@pytest.fixture(scope="session")
def sandbox_share(tmp_path_factory):
    """A directory that the test servers' sandboxed candidates see read-write
    at its own path ($MKEVOLVE_TEST_SANDBOX_SHARE, honoured only with
    --test-mode): where a test's candidate writes what it saw, or a file the
    test wants it to be able to change. Everything else outside its box is
    out of its sight (worker/mkevolve_worker/sandbox.py)."""
    d = tmp_path_factory.mktemp("share")
    os.chmod(d, 0o777)
    return d


@pytest.fixture()
def share_path(sandbox_share, request):
    """This test's own folder in the shared directory, writable by any uid."""
    d = sandbox_share / re.sub(r"\W+", "_", request.node.name)[:80]
    d.mkdir()
    os.chmod(d, 0o777)
    return d


@pytest.fixture(scope="session")
def worker_server(tmp_path_factory, sandbox_share):
    """A test-mode server whose own environment holds a planted secret."""
    cwd = str(tmp_path_factory.mktemp("server-cwd"))
    lock = str(tmp_path_factory.mktemp("locks") / "timing.lock")
    client = WorkerClient(["--test-mode"], extra_env={"FOO_API_KEY": "sk-planted-secret-123456",
                                                      "MKEVOLVE_TIMING_LOCK": lock,
                                                      "MKEVOLVE_TEST_SANDBOX_SHARE": str(sandbox_share)}, cwd=cwd)
    client.cwd = cwd
    client.timing_lock = lock
    yield client
    client.close()
