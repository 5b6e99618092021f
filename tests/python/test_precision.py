"""precision.py: the returned package names the precision each Triton dot was
checked in, so it computes the same in any process (no TRITON_F32_DEFAULT)."""

from __future__ import annotations

import ast

from mkevolve_worker import precision

KERNEL = '''
import torch
import triton
import triton.language as tl
from triton.language import dot as tdot


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr):
    """A tiled matmul, written the way an LLM writes it: several dot forms."""
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    a = tl.load(a_ptr + tl.arange(0, BLOCK)[:, None] * K + tl.arange(0, BLOCK)[None, :])
    b = tl.load(b_ptr + tl.arange(0, BLOCK)[:, None] * N + tl.arange(0, BLOCK)[None, :])
    acc += tl.dot(a, b)
    acc = tl.dot(a, b, acc)
    acc += tl.dot(
        a,
        b,
    )
    acc += tdot(a, b)
    acc += a @ b
    acc += tl.dot(a, b, input_precision="tf32")   # says what it wants: left alone
    acc += tl.dot(a, b, allow_tf32=False)         # so does this
    tl.store(c_ptr, acc)


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        c = torch.empty_like(a)
        matmul_kernel[(1,)](a, b, c, 16, 16, 16, BLOCK=16)
        return c
'''


def _dots(src: str):
    tree = ast.parse(src)
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", "")) in ("dot", "tdot"):
            out.append({k.arg: getattr(k.value, "value", None) for k in n.keywords})
    return out


def test_every_dot_that_names_no_precision_is_pinned_and_the_rest_left_alone():
    out, pinned, left = precision.pin_source(KERNEL, "kernel.py")
    assert not left, left
    assert [p["what"] for p in pinned] == ["dot", "dot", "dot", "dot", "@"]
    dots = _dots(out)
    # 4 dots pinned, the @ rewritten into a fifth, the two explicit ones as they were.
    assert sum(d.get("input_precision") == "ieee" for d in dots) == 5, out
    assert {"input_precision": "tf32"} in dots and {"allow_tf32": False} in dots
    assert "@" not in out.split("class ModelNew")[0].split("def matmul_kernel")[1]
    assert "acc = tl.dot(a, b, acc, input_precision=\"ieee\")" in out
    assert "tdot(a, b, input_precision=\"ieee\")" in out
    # Pinning is idempotent: a pinned file has nothing left to pin.
    again, pinned2, _ = precision.pin_source(out, "kernel.py")
    assert again == out and pinned2 == []


def test_a_file_without_triton_dots_is_unchanged():
    src = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x @ x\n"
    out, pinned, left = precision.pin_source(src)
    assert out == src and pinned == [] and left == []   # torch's @ outside a Triton kernel is not ours


def test_what_cannot_be_pinned_safely_is_named():
    src = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(a, b, kw):\n"
           "    x = tl.dot(a, b, None, **kw)\n")
    out, pinned, left = precision.pin_source(src, "k.py")
    assert out == src and pinned == []
    assert left and left[0]["line"] == 6 and "kwargs" in left[0]["why"]


def test_the_op_pins_every_file_of_a_package():
    res = precision.pin_files({"decomposed_solution.py": "import torch\n",
                               "subkernel_implementations/mm.py": KERNEL})
    assert res["precision"] == "ieee"
    assert res["files"]["decomposed_solution.py"] == "import torch\n"
    assert 'input_precision="ieee"' in res["files"]["subkernel_implementations/mm.py"]
    assert all(p["file"] == "subkernel_implementations/mm.py" for p in res["pinned"])


def test_the_server_answers_pin_precision(worker_server):
    r, _ = worker_server.request("pin_precision", files={"k.py": KERNEL})
    assert r["type"] == "result", r
    body = r.get("result", r)
    assert len(body["pinned"]) == 5
    bad, _ = worker_server.request("pin_precision", files=["k.py"])
    assert bad["type"] == "error" and "relative path" in bad["message"]
