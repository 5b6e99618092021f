"""The pre-flight problem check (op problem_check): a broken problem is named,
with what is wrong, before any LLM call is paid for; a sound one passes."""

from __future__ import annotations

import textwrap

from worker_client import problem


def _check(server, path):
    msg, _ = server.request("problem_check", problem=str(path), options={"test_cpu": True})
    assert msg["type"] == "result", msg
    return msg


def _write(tmp_path, name, body):
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


HEAD = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a):
        return a * 2
"""


def test_a_sound_problem_passes_and_says_what_forward_returned(worker_server):
    r = _check(worker_server, problem("add"))
    assert r["ok"] is True, r
    assert "float32[16, 32]" in r["message"], r


def test_each_broken_problem_is_named_with_its_fault(worker_server, tmp_path):
    cases = {
        "raises_at_import.py": ("raise RuntimeError('no such dataset')\n", "no such dataset"),
        "syntax.py": ("def get_inputs(:\n", "SyntaxError"),
        "string_inputs.py": (HEAD + "\ndef get_inputs():\n    return 'abc'\n\ndef get_init_inputs():\n    return []\n",
                             "get_inputs() returned a str"),
        "no_tensor.py": (HEAD + "\ndef get_inputs():\n    return [1, 2]\n\ndef get_init_inputs():\n    return []\n",
                         "returned no tensor"),
        "forward_raises.py": ("""
            import torch
            import torch.nn as nn

            class Model(nn.Module):
                def forward(self, a):
                    return a @ torch.ones(3, 3)

            def get_inputs():
                return [torch.randn(4, 5)]

            def get_init_inputs():
                return []
            """, "running Model.forward once"),
        "init_not_list.py": (HEAD + "\ndef get_inputs():\n    return [torch.ones(2)]\n\ndef get_init_inputs():\n"
                             "    return 7\n", "get_init_inputs() returned a int"),
    }
    for name, (src, needle) in cases.items():
        p = _write(tmp_path, name, src)
        r = _check(worker_server, p)
        assert r["ok"] is False, (name, r)
        assert str(p) in r["message"] and needle in r["message"], (name, r["message"])
    assert worker_server.request("ping")[0]["ok"] is True


def test_the_check_waits_for_a_neighbours_timed_phase(worker_server):
    """It runs the reference on the device: under the timing lock taken
    shared, so never while another slot on the same GPU is being timed."""
    import threading
    import time

    from mkevolve_worker import gpulock
    held = gpulock.TimingLock(worker_server.timing_lock)
    assert held.acquire(5)["held"]
    threading.Timer(1.5, held.release).start()
    t0 = time.monotonic()
    r = _check(worker_server, problem("add"))
    assert r["ok"] is True, r
    assert time.monotonic() - t0 >= 1.4
