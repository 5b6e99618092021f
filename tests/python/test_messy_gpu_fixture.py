"""The HAND-WRITTEN FIXTURE LLM examples/sessions/messy_gpu_fixture.py (gpu-suite
stage `messy`: issue 33's messy sessions on three real KernelBench problems),
checked on the CPU before it first runs on a GPU:

- every Triton kernel it replies with, through a CPU emulator of Triton
  (fixtures/fake_triton.py), against its subproblem's PyTorch reference at small
  and odd sizes (partial blocks), every tile shape, on fresh contiguous inputs
  and on the non-contiguous views the composition passes; the emulator cannot
  tell whether Triton compiles a kernel, it catches index, mask and stride bugs;
- the deliberately broken replies fail as intended: the contiguous-only kernels
  pass on fresh inputs and are wrong on the composition's views, the misnamed
  constructors work positionally and raise with the top level's keywords;
- the static checker finds PyTorch compute only on the fallback lines;
- each decomposition, written at small sizes, passes the worker's
  decompose_check within a tenth of fp32's tolerance, and its top level hands
  the named subproblem a non-contiguous view;
- the composed models (top level + kernels) match the original in the emulator.

The problems are KernelBench's own files with their size constants made small
when a KernelBench checkout is found, else stand-ins that compute what those
files compute (fixtures/messy_problems.py; a test checks the two agree when both
are at hand). No KernelBench file is committed.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import types

import pytest

torch = pytest.importorskip("torch")

import fake_triton  # noqa: E402  (tests/python/fixtures, on sys.path through conftest.py)

REPO = pathlib.Path(__file__).resolve().parents[2]
SESSIONS = REPO / "examples" / "sessions"
sys.path.insert(0, str(REPO / "worker"))

from mkevolve_worker import decompose_check as dc  # noqa: E402
from mkevolve_worker import static_check  # noqa: E402

from messy_problems import (PROBLEMS, SMALL, kb_constants, load_fixture,  # noqa: E402
                            kernelbench_source, problem_source, shrink, standin_source)

LAYOUT_TASK = {"99_Matmul_GELU_Softmax": "softmax_cols", "43_MinGPTCausalAttention": "causal_attention",
               "31_VisionAttention": "self_attention"}
NAMES_TASK = {"99_Matmul_GELU_Softmax": "linear_gelu", "43_MinGPTCausalAttention": "out_proj",
              "31_VisionAttention": "add_layernorm"}
FALLBACK_TASKS = {"softmax_cols", "causal_attention", "self_attention"}
TILES = range(4)


@pytest.fixture(scope="module")
def fx():
    return load_fixture()


@pytest.fixture
def fake(monkeypatch):
    triton, tl = fake_triton.modules(strided=True)
    monkeypatch.setitem(sys.modules, "triton", triton)
    monkeypatch.setitem(sys.modules, "triton.language", tl)


def load_source(name: str, src: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(src, f"<{name}>", "exec"), mod.__dict__)
    return mod


def all_tasks(fx):
    return [(p, t) for p in PROBLEMS for t in fx.DECOMPOSITIONS[p][1](SMALL[p])]


def reference(fx, problem, task, sizes=None):
    return load_source(f"{task}_ref", fx.DECOMPOSITIONS[problem][1](sizes or SMALL[problem])[task])


def pair(fx, problem, task, n, fixed, init, seed=0):
    """(reference Model, kernel ModelNew), both built with init under one seed; their parameters agree."""
    ref_mod = reference(fx, problem, task)
    kernel = load_source(f"{task}_{n}_{fixed}", fx.kernel_source(task, n, fixed))
    torch.manual_seed(seed)
    ref = ref_mod.Model(*init)
    torch.manual_seed(seed)
    new = kernel.ModelNew(*init)
    a, b = list(ref.parameters()), list(new.parameters())
    assert [p.shape for p in a] == [p.shape for p in b]
    assert all(torch.equal(x, y) for x, y in zip(a, b)), "the kernel draws its parameters otherwise"
    return ref, new


def outputs_match(want, got, tol=1e-5):
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(want) == len(got)
    return all(w.shape == g.shape and w.dtype == g.dtype and torch.allclose(w, g, atol=tol, rtol=tol)
               for w, g in zip(want, got))


# -- the composition's views, at small and odd sizes ------------------------------------
# Each builder returns (init args, inputs as the top level passes them).

def softmax_view(R, C):
    return [], [torch.randn(C, R).t()]                       # h.t(): shape (R, C), stride (1, R)


def attention_views(B, T, C, H):
    qkv = torch.randn(B, T, 3 * C)
    D = C // H
    q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in qkv.split(C, dim=2))
    return [64 if T <= 64 else 2 * T, 0.0], [q, k, v]        # (B, H, T, D) views of one buffer


def image_view(B, E, Hh, W):
    x = torch.rand(B, E, Hh, W)
    return x.view(B, E, Hh * W).permute(2, 0, 1)            # (L, N, E), stride (1, E*L, L)


VIEW_CASES = {
    "softmax_cols": [("99_Matmul_GELU_Softmax", lambda: softmax_view(72, 24)),
                     ("99_Matmul_GELU_Softmax", lambda: softmax_view(300, 9))],   # several row blocks
    "causal_attention": [("43_MinGPTCausalAttention", lambda: attention_views(2, 40, 48, 2)),   # hs 24 -> 32
                         ("43_MinGPTCausalAttention", lambda: attention_views(1, 70, 192, 2))],  # hs 96 -> 128
    "self_attention": [("31_VisionAttention", lambda: ([32, 2], [image_view(2, 32, 6, 7)])),
                       ("31_VisionAttention", lambda: ([64, 2], [image_view(2, 64, 10, 15)]))],  # L 150
    "add_layernorm": [("31_VisionAttention", lambda: ([32], [torch.randn(42, 2, 32), image_view(2, 32, 6, 7)])),
                      ("31_VisionAttention", lambda: ([40], [torch.randn(35, 3, 40), image_view(3, 40, 5, 7)]))],
}
CONTIGUOUS_CASES = {
    "linear_gelu": [("99_Matmul_GELU_Softmax", lambda: ([40, 72], [torch.rand(24, 40)])),
                    ("99_Matmul_GELU_Softmax", lambda: ([33, 70], [torch.rand(17, 33)]))],
    "qkv_heads": [("43_MinGPTCausalAttention", lambda: ([48, 2], [torch.rand(2, 40, 48)])),
                  ("43_MinGPTCausalAttention", lambda: ([40, 4], [torch.rand(3, 11, 40)]))],
    "out_proj": [("43_MinGPTCausalAttention", lambda: ([48, 48, 0.0], [torch.randn(2, 40, 48)])),
                 ("43_MinGPTCausalAttention", lambda: ([40, 72, 0.0], [torch.randn(3, 11, 40)]))],
}


def run_case(fx, problem, task, n, fixed, build, seed=0):
    torch.manual_seed(100 + seed)
    init, inputs = build()
    ref, new = pair(fx, problem, task, n, fixed, init, seed)
    with torch.no_grad():
        return ref(*inputs), new(*inputs), inputs


@pytest.mark.parametrize("n", TILES)
@pytest.mark.parametrize("task,case", [(t, i) for t in list(VIEW_CASES) + list(CONTIGUOUS_CASES) for i in range(2)])
def test_fixed_kernels_match_their_subproblem_in_every_tile_shape(fx, fake, task, case, n):
    problem, build = {**VIEW_CASES, **CONTIGUOUS_CASES}[task][case]
    want, got, _ = run_case(fx, problem, task, n, True, build, seed=n)
    assert outputs_match(want, got)


@pytest.mark.parametrize("problem", PROBLEMS)
def test_every_reply_kernel_matches_on_its_subproblems_own_inputs(fx, fake, problem):
    # get_inputs() at the small sizes (fresh, contiguous): every kernel, messy or fixed, passes here;
    # the messy ones are only wrong in the composition.
    for name, src in fx.DECOMPOSITIONS[problem][1](SMALL[problem]).items():
        ref_mod = load_source(f"{name}_ref", src)
        for fixed in (True, False):
            ref, new = pair(fx, problem, name, 0, fixed, ref_mod.get_init_inputs())
            torch.manual_seed(7)
            inputs = ref_mod.get_inputs()
            with torch.no_grad():
                assert outputs_match(ref(*inputs), new(*inputs)), (name, fixed)


def test_qkv_heads_returns_the_references_views(fx, fake):
    want, got, _ = run_case(fx, "43_MinGPTCausalAttention", "qkv_heads", 0, True,
                            CONTIGUOUS_CASES["qkv_heads"][0][1])
    for w, g in zip(want, got):
        assert w.stride() == g.stride() and not g.is_contiguous()


@pytest.mark.parametrize("n", TILES)
@pytest.mark.parametrize("task", sorted(LAYOUT_TASK.values()))
def test_contiguous_only_replies_are_wrong_on_the_compositions_views(fx, fake, task, n):
    problem, build = VIEW_CASES[task][0]
    want, got, inputs = run_case(fx, problem, task, n, False, build, seed=n)
    assert any(not x.is_contiguous() for x in inputs)
    assert not outputs_match(want, got), "the contiguous-only kernel should read the wrong elements"
    # ... and right on the same values laid out contiguously (its own trials on fresh inputs pass).
    torch.manual_seed(100 + n)
    init, views = build()
    ref, new = pair(fx, problem, task, n, False, init, n)
    dense = [x.contiguous() for x in views]
    with torch.no_grad():
        assert outputs_match(ref(*dense), new(*dense))


@pytest.mark.parametrize("problem", PROBLEMS)
def test_misnamed_constructors_work_positionally_and_raise_with_the_top_levels_keywords(fx, fake, problem):
    task = NAMES_TASK[problem]
    ref_mod = reference(fx, problem, task)
    init = ref_mod.get_init_inputs()
    messy = load_source("messy", fx.kernel_source(task, 0, False))
    fixed = load_source("fixed", fx.kernel_source(task, 0, True))
    messy.ModelNew(*init)
    names = fx.NAMES[task][0]
    kwargs = dict(zip(names, init))
    top = fx.DECOMPOSITIONS[problem][0](SMALL[problem])
    assert all(f"{k}=" in top for k in names), "the top level passes these by keyword"
    with pytest.raises(TypeError, match="unexpected keyword"):
        messy.ModelNew(**kwargs)
    fixed.ModelNew(**kwargs)


@pytest.mark.parametrize("task", ["linear_gelu", "softmax_cols", "qkv_heads", "causal_attention", "out_proj",
                                  "self_attention", "add_layernorm"])
def test_static_check_finds_pytorch_only_on_the_fallback_lines(fx, task, tmp_path):
    for fixed in (True, False):
        src = fx.kernel_source(task, 0, fixed)
        found = static_check.check_source(src, str(tmp_path / f"{task}.py"))
        lines = src.splitlines()
        for v in found:
            assert v["rule"] == "torch-compute", v
            line = lines[v["line"] - 1]
            assert re.search(r"torch\.softmax|scaled_dot_product_attention|torch\.randn", line), (v, line)
        # The fallbacks: the fixed softmax_cols and causal_attention, and self_attention's helper (both replies).
        has_fallback = task in FALLBACK_TASKS and (fixed or task == "self_attention")
        assert bool(found) == has_fallback, found


def test_every_dot_pins_ieee_precision(fx):
    for task in fx.KIND:
        for fixed in (True, False):
            src = fx.kernel_source(task, 0, fixed)
            for call in re.findall(r"tl\.dot\([^)]*\)", src):
                assert 'input_precision="ieee"' in call, (task, call)


# -- the decompositions: the worker's decompose_check at small sizes ----------------------

def write_decomposition(fx, problem: str, root: pathlib.Path) -> pathlib.Path:
    """The fixture's decompose reply at the small sizes, unpacked as the binary unpacks it."""
    text = fx.DECOMPOSITIONS[problem][0](SMALL[problem])
    files = dict(re.findall(r"```python file=(\S+)\n(.*?)```", text, re.S))
    assert "decomposed_problem.py" in files and len(files) >= 3, list(files)
    for name, body in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(body)
    return root


@pytest.mark.parametrize("problem", PROBLEMS)
def test_decomposition_is_accepted_within_a_tenth_of_the_tolerance(fx, problem, tmp_path):
    src, origin = problem_source(problem)
    (tmp_path / "problem.py").write_text(src)
    root = write_decomposition(fx, problem, tmp_path / "d")
    result = dc.verify_decomposition(str(tmp_path / "problem.py"), str(root / "decomposed_problem.py"),
                                     str(root / "subkernel_problems"), {"device": "cpu"})
    assert result["ok"], (origin, result["failures"])
    bound = result["tolerance"]["outputs"][0]
    assert result["tolerance"]["fraction"] == 0.1 and bound["atol"] == pytest.approx(1e-5)
    # Re-expressed, not copied: equal up to rounding only (0 is possible, never above the bound).
    assert 0 <= result["max_abs_err"] <= bound["atol"] + bound["rtol"], result["max_abs_err"]
    seen = result["subproblems"][LAYOUT_TASK[problem]]["input_layouts_seen"]
    assert seen and all(any(e and not e["contiguous"] for e in call) for call in seen), seen
    assert set(result["subproblems"]) == set(fx.DECOMPOSITIONS[problem][1](SMALL[problem]))


@pytest.mark.parametrize("problem", PROBLEMS)
def test_standins_compute_what_kernelbench_computes(problem):
    kb = kernelbench_source(problem)
    if kb is None:
        pytest.skip("no KernelBench checkout here ($MKEVOLVE_KB, .kb/ or $MKEVOLVE_KB_GIT)")
    a = load_source("kb", shrink(kb, kb_constants(problem)))
    b = load_source("standin", standin_source(problem))
    torch.manual_seed(0)
    ma = a.Model(*a.get_init_inputs())
    torch.manual_seed(0)
    mb = b.Model(*b.get_init_inputs())
    assert a.get_init_inputs() == b.get_init_inputs()
    torch.manual_seed(1)
    x = a.get_inputs()
    with torch.no_grad():
        assert torch.equal(ma(*x), mb(*x))


@pytest.mark.parametrize("problem", PROBLEMS)
def test_composed_kernels_match_the_original_in_the_emulator(fx, fake, problem, tmp_path):
    # The top level with every subproblem replaced by its fixed kernel (what the composition ships),
    # against the original Model; with the misnamed kernel, building it raises as in the composition.
    src, _ = problem_source(problem)
    orig = load_source("orig", src)
    top = re.search(r"```python file=decomposed_problem.py\n(.*?)```",
                    fx.DECOMPOSITIONS[problem][0](SMALL[problem]), re.S).group(1)
    for fixed_names in (True, False):
        pkg = types.ModuleType("subkernel_problems")
        pkg.__path__ = []
        mods = {"subkernel_problems": pkg}
        for task in fx.DECOMPOSITIONS[problem][1](SMALL[problem]):
            k = load_source(f"k_{task}", fx.kernel_source(task, 1, fixed_names or task != NAMES_TASK[problem]))
            mods[f"subkernel_problems.{task}"] = types.SimpleNamespace(Model=k.ModelNew)
        saved = {k: sys.modules.get(k) for k in mods}
        sys.modules.update(mods)
        try:
            new_mod = load_source("composed", top)
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
        init = orig.get_init_inputs()
        if not fixed_names:
            with pytest.raises(TypeError, match="unexpected keyword"):
                new_mod.ModelNew(*init)
            continue
        torch.manual_seed(0)
        ref = orig.Model(*init)
        torch.manual_seed(0)
        new = new_mod.ModelNew(*init)
        torch.manual_seed(1)
        x = orig.get_inputs()
        with torch.no_grad():
            want, got = ref(*x), new(*x)
        assert want.shape == got.shape
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


# -- the replies ---------------------------------------------------------------------

def kernel_in(text: str) -> str:
    return re.search(r"```python file=kernel.py\n(.*?)```", text, re.S).group(1)


@pytest.mark.parametrize("problem", PROBLEMS)
def test_which_reply_each_request_gets(fx, problem, tmp_path):
    layout, names = LAYOUT_TASK[problem], NAMES_TASK[problem]
    st = tmp_path / "state"
    gen = fx.reply("generate", layout, "write a kernel; inputs arrive as views that are not contiguous", st)
    assert fx.BANNER in gen and fx.STRIDED_MARK not in kernel_in(gen)
    assert gen.strip().endswith(".") and not gen.lstrip().startswith("```"), "prose around the code"
    blind = fx.reply("debug", layout, "mismatch at index (0, 0)\n" + kernel_in(gen), st)
    assert fx.STRIDED_MARK not in kernel_in(blind), "a debug that does not name the layout gets the same code"
    seen = fx.reply("debug", layout, "on trial c0t0, input 0 was a non-contiguous view: shape [..]", st)
    assert fx.STRIDED_MARK in kernel_in(seen)
    opt = fx.reply("optimize", layout, "make it faster\n" + kernel_in(seen), st)
    assert fx.STRIDED_MARK in kernel_in(opt) and kernel_in(opt) != kernel_in(seen)
    gen_n = fx.reply("generate", names, "write a kernel", st)
    wrong = fx.NAMES[names][1][0]
    assert f"self, {wrong}," in kernel_in(gen_n)
    assert f"self, {wrong}," in kernel_in(fx.reply("optimize", names, kernel_in(gen_n), st))
    fixed = fx.reply("debug", names, "It passed its own trials, but inside the composed solution it failed", st)
    assert fx.NAMES_MARK in kernel_in(fixed) and f"self, {wrong}," not in kernel_in(fixed)
    assert fx.NAMES_MARK in kernel_in(fx.reply("optimize", names, kernel_in(fixed), st))
    # Distinct files, every one of them.
    texts = [kernel_in(fx.reply("generate", layout, "", st)) for _ in range(3)]
    assert len(set(texts)) == 3
    assert fx.reply("split", layout, "", st) is None and fx.reply("generate", "whole_model", "", st) is None


def test_the_script_speaks_the_exec_protocol(tmp_path):
    body = json.dumps({"messages": [{"role": "system", "content": "s"},
                                    {"role": "user", "content": "input 0 was a non-contiguous view: shape [8]"}],
                       "mkevolve": {"agent": "debug", "task": "softmax_cols", "sample": 0}})
    run = lambda agent, task: subprocess.run(
        [sys.executable, str(SESSIONS / "messy_gpu_fixture.py"), "--state", str(tmp_path / "st")], input=body,
        capture_output=True, text=True, check=True,
        env={**os.environ, "MKEVOLVE_AGENT": agent, "MKEVOLVE_TASK": task}).stdout
    out = run("debug", "softmax_cols")
    assert "HAND-WRITTEN FIXTURE" in out and "fixture-mark: strided" in out
    for problem in PROBLEMS:
        dec = run("decompose", problem)
        assert "HAND-WRITTEN FIXTURE" in dec and dec.count("```python file=") >= 3
    assert "no files" in run("fuse", "43_MinGPTCausalAttention")
