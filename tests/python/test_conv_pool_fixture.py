"""The Triton kernels of the HAND-WRITTEN FIXTURE LLM
examples/sessions/conv_pool_fixture.py (gpu-suite stage `adapt`), run on the
CPU through a small Triton emulator (fixtures/fake_triton.py) against each
subproblem's PyTorch reference: every tile shape the fixture replies with, at
the subproblem's own sizes and at odd sizes that leave partial blocks. No GPU
and no Triton here, so this catches wrong indices, masks, parameter draws and
results before the kernels first run on a GPU; it cannot catch what only
Triton's compiler would reject.
"""
from __future__ import annotations

import importlib.util
import pathlib
import sys
import types

import pytest

torch = pytest.importorskip("torch")

import fake_triton  # noqa: E402  (tests/python/fixtures, on sys.path through conftest.py)

REPO = pathlib.Path(__file__).resolve().parents[2]
SESSIONS = REPO / "examples" / "sessions"


@pytest.fixture(scope="module")
def fixture():
    spec = importlib.util.spec_from_file_location("conv_pool_fixture", SESSIONS / "conv_pool_fixture.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def fake_triton_modules(monkeypatch):
    triton, tl = fake_triton.modules()
    monkeypatch.setitem(sys.modules, "triton", triton)
    monkeypatch.setitem(sys.modules, "triton.language", tl)


def load_source(name: str, src: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(src, f"<{name}>", "exec"), mod.__dict__)
    return mod


def check(fixture, task: str, n: int, shape=None, seed: int = 0, cpu: bool = False, init=None):
    """Kernel reply n for task against the subproblem's Model, on get_inputs() or on randn(shape), built
    with get_init_inputs() or with init."""
    files = {name: src for pool in fixture.POOLS for name, src in fixture.subproblems(pool).items()}
    problem = load_source(f"{task}_problem", files[task])
    kernel = load_source(f"{task}_kernel_{n}", fixture.kernel(task, n, cpu))
    init = problem.get_init_inputs() if init is None else init
    torch.manual_seed(seed)
    ref = problem.Model(*init)
    torch.manual_seed(seed)
    new = kernel.ModelNew(*init)
    # The same parameters, drawn the same way (what composing the package relies on).
    ref_params = [p.detach() for p in ref.parameters()]
    new_params = [p.detach() for p in new.parameters()]
    assert [p.shape for p in ref_params] == [p.shape for p in new_params]
    assert all(torch.equal(a, b) for a, b in zip(ref_params, new_params))
    torch.manual_seed(seed + 1)
    inputs = problem.get_inputs() if shape is None else [torch.randn(*shape)]
    with torch.no_grad():
        want = ref(*inputs)
        got = new(*inputs)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    return got


TILES = range(4)  # the fixture cycles through four tile shapes per subproblem


@pytest.mark.parametrize("task", ["conv_relu", "pointwise_conv", "avg_pool", "max_pool", "lp_pool"])
def test_first_reply_at_the_subproblem_sizes(fixture, fake_triton_modules, task):
    check(fixture, task, 0)


@pytest.mark.parametrize("n", TILES)
@pytest.mark.parametrize("task,shape", [
    ("conv_relu", (3, 3, 13, 11)),            # 3 * 11 * 9 = 297 rows: a partial last row block
    ("pointwise_conv", (2, 64, 9, 7)),        # 126 rows, 128 output channels
    ("avg_pool", (3, 5, 13, 11)),             # odd sizes: the last row and column are dropped
    ("max_pool", (3, 5, 13, 11)),
    ("lp_pool", (3, 5, 13, 11)),
])
def test_every_tile_shape_on_partial_blocks(fixture, fake_triton_modules, task, shape, n):
    check(fixture, task, n, shape=shape, seed=n)


@pytest.mark.parametrize("n", TILES)
@pytest.mark.parametrize("task,init,shape", [
    ("conv_relu", [5, 40, 3], (2, 5, 10, 9)),     # 40 output channels: a partial column block
    ("pointwise_conv", [24, 40], (2, 24, 5, 6)),  # a reduction shorter than one BLOCK_K
])
def test_convolutions_at_other_channel_counts(fixture, fake_triton_modules, task, init, shape, n):
    check(fixture, task, n, shape=shape, seed=n, init=init)


def test_max_pool_of_negative_inputs(fixture, fake_triton_modules):
    # No window may take a 0 from a masked lane or an initial value: all inputs below zero.
    kernel = load_source("max_pool_kernel", fixture.kernel("max_pool", 0, False))
    x = -1.0 - torch.rand(2, 3, 8, 8)
    got = kernel.ModelNew(2)(x)
    torch.testing.assert_close(got, torch.nn.functional.max_pool2d(x, 2), atol=0, rtol=0)


def test_lp_pool_refuses_another_norm(fixture, fake_triton_modules):
    kernel = load_source("lp_pool_kernel", fixture.kernel("lp_pool", 0, False))
    with pytest.raises(ValueError, match="norm_type 2 only"):
        kernel.ModelNew(3, 2)


@pytest.mark.parametrize("task", ["conv_relu", "pointwise_conv", "avg_pool", "max_pool", "lp_pool"])
def test_cpu_stand_ins_match_too(fixture, task):
    check(fixture, task, 0, cpu=True)


def test_the_emulator_catches_an_out_of_bounds_mask(fixture, fake_triton_modules):
    # The check above can fail: a pooling kernel without its mask reads past the end.
    src = fixture.kernel("avg_pool", 0, False).replace("mask=mask, other=0.0", "other=0.0")
    kernel = load_source("avg_pool_unmasked", src)
    with pytest.raises(IndexError, match="outside a tensor"):
        kernel.ModelNew(2)(torch.randn(1, 1, 6, 6))


def test_variant_decompositions_keep_the_shared_files(fixture):
    base = fixture.subproblems("avg_pool")
    for pool in ("max_pool", "lp_pool"):
        files = fixture.subproblems(pool)
        assert files["conv_relu"] == base["conv_relu"] and files["pointwise_conv"] == base["pointwise_conv"]
        assert pool in files and "avg_pool" not in files
        reply = fixture.decomposition(fixture.POOLS[pool][1])
        assert f"file=subkernel_problems/{pool}.py" in reply and "avg_pool" not in reply.split("```")[1]
