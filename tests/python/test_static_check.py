"""Tests for the static (AST) cheat detector.

Fixtures under static_fixtures/ are self-describing: a line of a cheating
fixture that must be reported ends with `# expect: <rule>[, <rule>...]`, and
the checker must report exactly those (file, line, rule) triples, no more.
Every honest fixture under static_fixtures/clean must come back empty.
"""
import glob
import os
import re
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORKER = os.path.join(REPO, "worker")
sys.path.insert(0, WORKER)

from mkevolve_worker import static_check  # noqa: E402
from mkevolve_worker.static_check import RULES, check_file, check_source  # noqa: E402

FIXTURES = os.path.join(HERE, "static_fixtures")
EXPECT_RE = re.compile(r"#\s*expect:\s*([a-z0-9\-, ]+)\s*$")


def _entry_files(kind):
    singles = sorted(glob.glob(os.path.join(FIXTURES, kind, "*.py")))
    packages = sorted(glob.glob(os.path.join(FIXTURES, kind, "*", "decomposed_solution.py")))
    return singles + packages


def _ids(paths):
    return [os.path.relpath(p, FIXTURES) for p in paths]


def _expected(entry):
    """(relative file, line, rule) from `# expect:` comments in the entry file
    and, for packages, every .py file beside and below it."""
    if os.path.basename(entry) == "decomposed_solution.py":
        files = glob.glob(os.path.join(os.path.dirname(entry), "**", "*.py"), recursive=True)
    else:
        files = [entry]
    out = set()
    for path in files:
        with open(path, encoding="utf-8") as f:
            for lineno, text in enumerate(f, 1):
                m = EXPECT_RE.search(text)
                if m:
                    for rule in m.group(1).split(","):
                        out.add((os.path.relpath(path, FIXTURES), lineno, rule.strip()))
    return out


def _actual(violations):
    return {(os.path.relpath(os.path.abspath(v["file"]), FIXTURES), v["line"], v["rule"])
            for v in violations}


CHEATS = _entry_files("cheat")
CLEAN = _entry_files("clean")


@pytest.mark.parametrize("entry", CLEAN, ids=_ids(CLEAN))
def test_honest_fixture_is_clean(entry):
    assert check_file(entry) == []


@pytest.mark.parametrize("entry", CLEAN, ids=_ids(CLEAN))
def test_honest_fixture_is_clean_under_swap_policy(entry):
    assert check_file(entry, allow_pytorch=True) == []


@pytest.mark.parametrize("entry", CHEATS, ids=_ids(CHEATS))
def test_cheat_fixture_reports_exactly_the_expected_lines(entry):
    expected = _expected(entry)
    assert expected, f"{entry} has no '# expect:' annotations"
    violations = check_file(entry)
    for v in violations:
        assert set(v) == {"file", "line", "rule", "message"}
        assert v["rule"] in RULES
        assert isinstance(v["line"], int) and v["line"] >= 1
        assert v["message"]
    assert _actual(violations) == expected


@pytest.mark.parametrize("entry", CHEATS, ids=_ids(CHEATS))
def test_swap_policy_drops_only_torch_compute(entry):
    # The policy lets PyTorch compute pass, and so a forward with no Triton
    # launch of its own (the expectation on a `def forward` line).
    def forward_line(e):
        lines = open(os.path.join(FIXTURES, e[0])).read().splitlines()
        return 0 < e[1] <= len(lines) and "def forward" in lines[e[1] - 1]
    expected = {e for e in _expected(entry) if e[2] != "torch-compute" and
                not (e[2] == "no-triton-launch" and forward_line(e))}
    assert _actual(check_file(entry, allow_pytorch=True)) == expected


def test_every_rule_is_exercised_by_a_fixture():
    seen = set()
    for entry in CHEATS:
        seen |= {rule for _, _, rule in _expected(entry)}
    assert seen == set(RULES)


# ---------------------------------------------------------------------------
# Focused cases on source text
# ---------------------------------------------------------------------------

PRELUDE = '''\
import math
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
'''
PRELUDE_LINES = PRELUDE.count("\n")


def run(body, allow_pytorch=False):
    """Violations for PRELUDE + body, as sorted (line-in-body, rule) pairs."""
    src = PRELUDE + textwrap.dedent(body)
    out = check_source(src, "cand.py", allow_pytorch=allow_pytorch)
    return sorted((v["line"] - PRELUDE_LINES, v["rule"]) for v in out)


def test_shape_arithmetic_and_grids_are_not_compute():
    assert run('''
        class ModelNew(nn.Module):
            def forward(self, x, y):
                B, C, H, W = x.shape
                n = x.numel()
                rows = x.size(0) * x.size(1) // 2 + 1
                half = x.shape[-1] % 2 == 0 and x.dim() >= 2
                scale = 1.0 / math.sqrt(C) if C > 0 else -1.0
                blk = max(16, min(1024, triton.next_power_of_2(W)))
                grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]) * 2,)
                out = torch.empty((B, C * 2, H, W), device=x.device, dtype=x.dtype)
                strides = [s * 4 for s in x.stride()]
                if x.dtype == torch.float16 or y is None or rows < -n:
                    raise ValueError(str(strides))
                k[grid](x, out, n, BLOCK=blk)
                return out
    ''') == []


def test_prose_in_docstrings_strings_and_comments_is_not_code():
    assert run('''
        class ModelNew(nn.Module):
            """Replaces torch.matmul(x, w) and F.relu; see torch.ops.aten.mm."""

            def forward(self, x):
                """exec('torch.mm(a, b)') would be cheating; we don't."""
                note = "torch.matmul(x, x) @ eval open sys.exit"  # torch.compile(self)
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return y
    ''') == []


def test_torch_calls_in_init_are_weight_preparation():
    assert run('''
        class ModelNew(nn.Module):
            def __init__(self, n):
                super().__init__()
                w = torch.randn(n, n)
                self.w = nn.Parameter(torch.matmul(w, w.t()) * 0.5 + torch.eye(n))
                self._prepare()

            def _prepare(self):
                self.wt = self.w.detach().t().contiguous().abs()

            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return y
    ''') == []


def test_helper_reachable_from_init_and_forward_is_data_path():
    assert run('''
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(4, 4))
                self._norm(self.w)

            def _norm(self, t):
                return t / t.norm()

            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return self._norm(y)
    ''') == [(9, "torch-compute")]


def test_at_operator_on_unknown_operands_is_flagged():
    assert run('''
        combine = lambda a, b: a @ b

        class ModelNew(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return combine(y, y)
    ''') == [(2, "torch-compute")]


def test_compute_on_dead_code_is_ignored_but_reachable_is_not():
    body = '''
        def unused(a):
            return torch.softmax(a, -1)

        def used(a):
            return torch.softmax(a, -1)

        class ModelNew(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return {}(y)
    '''
    assert run(body.format("y.contiguous")) == []
    assert run(body.format("used")) == [(6, "torch-compute")]


def test_launch_only_in_init_does_not_count():
    assert run('''
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                x = torch.zeros(4)
                k[(1,)](x, x, 4, BLOCK=4)

            def forward(self, x):
                return x.clone()
    ''') == [(8, "no-triton-launch")]


def test_launch_through_method_chain_counts():
    assert run('''
        class ModelNew(nn.Module):
            def forward(self, x):
                return self._a(x)

            def _a(self, x):
                return self._b(x.contiguous())

            def _b(self, x):
                y = torch.empty_like(x)
                k[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
                return y
    ''') == []


def test_launch_through_inherited_forward_counts():
    assert run('''
        class Base(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return y

        class ModelNew(Base):
            pass
    ''') == []


def test_modelnew_alias_assignment_is_accepted():
    assert run('''
        class _Impl(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return y

        ModelNew = _Impl
    ''') == []


def test_kernel_launch_in_submodule_instance_counts():
    assert run('''
        class Act(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return y

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([Act() for _ in range(3)])

            def forward(self, x):
                for blk in self.blocks:
                    x = blk(x)
                return x
    ''') == []


def test_lazy_weight_cache_and_workspace_are_not_output_caches():
    assert run('''
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(8, 8))
                self._wt = None
                self._buf = {}

            def forward(self, x):
                if self._wt is None:
                    self._wt = self.weight.t().contiguous()
                key = tuple(x.shape)
                if key not in self._buf:
                    self._buf[key] = torch.empty(x.numel(), device=x.device)
                scratch = self._buf[key]
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                k[(1,)](self._wt, scratch, x.numel(), BLOCK=1024)
                return y
    ''') == []


def test_returning_a_reused_output_buffer_is_an_output_cache():
    assert run('''
        class ModelNew(nn.Module):
            def forward(self, x):
                if getattr(self, "_out", None) is None:
                    self._out = torch.empty_like(x)
                k[(1,)](x, self._out, x.numel(), BLOCK=1024)
                return self._out
    ''') == [(7, "output-cache")]


def test_module_level_tensor_returned_from_forward_is_an_output_cache():
    assert run('''
        _PRECOMPUTED = torch.zeros(16)

        class ModelNew(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return _PRECOMPUTED
    ''') == [(8, "output-cache")]


def test_getattr_on_self_with_computed_name_is_allowed():
    assert run('''
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                for i in range(2):
                    setattr(self, f"scale_{i}", float(i))

            def forward(self, x):
                s = getattr(self, "scale_" + str(x.dim() % 2))
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return y
    ''') == []


def test_hook_lambda_is_flagged_even_when_registered_in_init():
    assert run('''
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_forward_hook(lambda m, i, out: out * 2)

            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return y
    ''') == [(5, "patching")]


def test_function_stored_in_init_runs_later_so_its_body_is_data_path():
    assert run('''
        def _post(t):
            return t.tanh()

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.post = _post

            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return self.post(y)
    ''') == [(3, "torch-compute")]


def test_allow_pytorch_permits_a_pure_pytorch_model_new():
    """Swap's policy: a PyTorch implementation may pass (the verdict marks it),
    so it needs no Triton launch; `class ModelNew(Model)` (Swap's fallback, and
    a reference checked as its own candidate) passes too."""
    body = '''
        import torch.nn.functional as F

        class ModelNew(nn.Module):
            def forward(self, x):
                return F.relu(x) @ x
    '''
    assert run(body) == [(5, "no-triton-launch"), (6, "torch-compute")]
    assert run(body, allow_pytorch=True) == []
    subclass = '''
        class Model(nn.Module):
            def forward(self, x):
                return torch.relu(x)

        class ModelNew(Model):
            pass
    '''
    assert run(subclass, allow_pytorch=True) == []
    assert "no-triton-launch" in [rule for _, rule in run(subclass)]


def test_allow_pytorch_keeps_tf32_and_compile_rules():
    assert run('''
        torch.backends.cuda.matmul.allow_tf32 = True

        class ModelNew(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return torch.compile(torch.mm)(y, y)
    ''', allow_pytorch=True) == [(2, "tf32"), (8, "torch-compile")]


def test_nested_def_and_class_in_if_block_are_checked():
    assert run('''
        if True:
            def helper(a):
                return a.relu()

        class ModelNew(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)

                def inner(z):
                    return z.sigmoid()
                return inner(helper(y))
    ''') == [(4, "torch-compute"), (12, "torch-compute")]


def test_scalar_forward_arguments_are_not_tensors():
    assert run('''
        class ModelNew(nn.Module):
            def forward(self, x, dim: int, eps=1e-5, steps=None):
                n = x.shape[dim] * 2 + dim
                for i in range(steps):
                    n += i
                y = torch.empty_like(x)
                k[(1,)](x, y, n, BLOCK=int(eps * 1e5))
                return y
    ''') == []


def test_tensor_argument_passed_to_helper_is_tracked():
    assert run('''
        def launch(a, b, n):
            out = torch.empty_like(a)
            k[(1,)](a, out, n * 2, BLOCK=1024)
            return out + b

        class ModelNew(nn.Module):
            def forward(self, x, y):
                return launch(x, y, x.numel())
    ''') == [(5, "torch-compute")]


def test_syntax_error_is_a_single_violation():
    out = check_source("def f(:\n    pass\n", "bad.py")
    assert [(v["file"], v["line"], v["rule"]) for v in out] == [("bad.py", 1, "syntax-error")]


def test_missing_modelnew_with_only_reference():
    out = check_source("import torch\nclass Model(torch.nn.Module):\n    pass\n", "m.py")
    assert [(v["line"], v["rule"]) for v in out] == [(1, "missing-modelnew")]


def test_modelnew_from_unresolvable_module_cannot_show_a_launch(tmp_path):
    p = tmp_path / "top.py"
    p.write_text("from somewhere_else import ModelNew\n")
    out = check_file(str(p))
    assert [(v["line"], v["rule"]) for v in out] == [(1, "no-triton-launch")]


def test_extra_files_are_checked_under_their_own_names(tmp_path):
    top = tmp_path / "top.py"
    top.write_text(PRELUDE + textwrap.dedent('''
        class ModelNew(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return y
    '''))
    extra = tmp_path / "helpers.py"
    extra.write_text("import os\n\ndef boom():\n    os.system('rm -rf /')\n")
    assert check_file(str(top)) == []
    out = check_file(str(top), extra_files=[str(extra)])
    assert [(v["file"], v["line"], v["rule"]) for v in out] == [(str(extra), 4, "process")]


def test_check_source_resolves_relative_imports_next_to_filename():
    entry = os.path.join(FIXTURES, "cheat", "pkg_compute", "decomposed_solution.py")
    with open(entry, encoding="utf-8") as f:
        src = f.read()
    out = check_source(src, entry)
    assert _actual(out) == _expected(entry)


def test_package_sibling_names_are_reported_relative_to_the_given_path():
    entry = os.path.join("static_fixtures", "cheat", "pkg_compute", "decomposed_solution.py")
    cwd = os.getcwd()
    os.chdir(HERE)
    try:
        files = {v["file"] for v in check_file(entry)}
    finally:
        os.chdir(cwd)
    assert files == {entry, os.path.join("static_fixtures", "cheat", "pkg_compute",
                                         "subkernel_implementations", "proj.py")}


def test_violations_are_sorted_main_file_first_then_by_line():
    entry = os.path.join(FIXTURES, "cheat", "pkg_compute", "decomposed_solution.py")
    out = check_file(entry)
    assert out[0]["file"] == entry
    lines = [v["line"] for v in out if v["file"] == out[-1]["file"]]
    assert lines == sorted(lines)


def test_module_does_not_import_torch_or_triton():
    code = ("import sys; sys.path.insert(0, %r); import mkevolve_worker.static_check; "
            "bad = [m for m in ('torch', 'triton', 'numpy') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)" % WORKER)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=WORKER)
    return subprocess.run([sys.executable, "-m", "mkevolve_worker.static_check", *args],
                          capture_output=True, text=True, env=env)


def test_cli_clean_exits_zero_and_prints_nothing():
    r = _cli(os.path.join(FIXTURES, "clean", "softmax.py"))
    assert (r.returncode, r.stdout) == (0, "")


def test_cli_violations_exit_one_with_file_line_rule_message():
    path = os.path.join(FIXTURES, "cheat", "compute_torch_matmul.py")
    r = _cli(path)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"{path}:23: torch-compute: ")


def test_cli_allow_pytorch_flag():
    r = _cli("--allow-pytorch", os.path.join(FIXTURES, "cheat", "compute_torch_matmul.py"))
    assert (r.returncode, r.stdout) == (0, "")


def test_cli_unreadable_file_exits_two(tmp_path):
    r = _cli(str(tmp_path / "missing.py"))
    assert r.returncode == 2
    assert "missing.py" in r.stderr
    binary = tmp_path / "bin.py"
    binary.write_bytes(b"\xff\xfe\x00junk")
    assert _cli(str(binary)).returncode == 2


def test_main_returns_codes_in_process(capsys):
    assert static_check.main([os.path.join(FIXTURES, "clean", "softmax.py")]) == 0
    assert static_check.main([os.path.join(FIXTURES, "cheat", "exits.py")]) == 1
    out = capsys.readouterr().out
    assert ": exit: " in out


def test_running_statistics_and_rnn_state_on_self_are_not_caches():
    assert run('''
        class ModelNew(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.register_buffer("running_mean", torch.zeros(n))
                self.hidden = torch.zeros(1, n)

            def forward(self, x, h0=None):
                if h0 is not None:
                    self.hidden = h0
                stats = torch.empty(x.shape[1], device=x.device)
                k[(1,)](x, stats, x.numel(), BLOCK=1024)
                self.running_mean = stats
                out = torch.empty_like(x)
                k[(1,)](x, out, x.numel(), BLOCK=1024)
                self.hidden = out
                return self.hidden
    ''') == []


def test_state_returned_on_a_path_that_skips_the_update_is_a_cache():
    assert run('''
        class ModelNew(nn.Module):
            def forward(self, x):
                if x.shape[0] == 1:
                    y = torch.empty_like(x)
                    k[(1,)](x, y, x.numel(), BLOCK=1024)
                    self.last = y
                return self.last
    ''') == [(8, "output-cache")]


def test_negative_and_dtype_defaults_mark_scalar_parameters():
    assert run('''
        class ModelNew(nn.Module):
            def forward(self, x, dim=-1, dtype=torch.float32, sizes=(1, 2)):
                assert dim == -1 and dtype == torch.float32
                n = sizes[0] * x.shape[dim] - dim
                y = torch.empty_like(x)
                k[(1,)](x, y, n, BLOCK=1024)
                return y
    ''') == []


def test_default_argument_smuggling_a_torch_function():
    assert run('''
        class ModelNew(nn.Module):
            def forward(self, x, op=torch.mm):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return op(y, y)
    ''') == [(3, "torch-compute"), (6, "torch-compute")]


def test_torch_function_overrides_are_patching():
    assert run('''
        class Fake(torch.Tensor):
            pass

        class Spy:
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        class ModelNew(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return y
    ''') == [(2, "patching"), (7, "patching")]


def test_layer_called_through_dunder_call_or_unbound_forward():
    assert run('''
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.fcs = (nn.Linear(4, 4),)

            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                a = self.fc.__call__(y)
                b = nn.Linear.forward(self.fc, y)
                c = nn.Module.__call__(self.fc, y)
                d = self.fcs[0](y)
                e = nn.Linear(4, 4)(y)
                return y
    ''') == [(11, "torch-compute"), (12, "torch-compute"), (13, "torch-compute"),
             (14, "torch-compute"), (15, "torch-compute")]


def test_import_dunder_and_importlib_literals_resolve_to_torch():
    assert run('''
        import importlib

        class ModelNew(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                a = __import__("torch").mm(y, y)
                b = importlib.import_module("torch.nn.functional").relu(y)
                c = importlib.import_module("subprocess")
                return y
    ''') == [(8, "dynamic-code"), (8, "torch-compute"), (9, "torch-compute"), (10, "process")]


def test_local_import_inside_forward_is_tracked():
    assert run('''
        class ModelNew(nn.Module):
            def forward(self, x):
                import torch.nn.functional as G
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return G.softmax(y, -1)
    ''') == [(7, "torch-compute")]


def test_implicit_dunders_and_properties_are_data_path():
    assert run('''
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(4, 4))

            @property
            def wt(self):
                return self.w.t().exp()

            def __getattr__(self, name):
                return torch.relu

            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](self.wt, y, x.numel(), BLOCK=1024)
                return y
    ''') == [(9, "torch-compute"), (12, "torch-compute")]


def test_metaclass_is_flagged():
    assert run('''
        class Meta(type):
            def __call__(cls, *a, **kw):
                return super().__call__(*a, **kw)

        class ModelNew(nn.Module, metaclass=Meta):
            def forward(self, x):
                y = torch.empty_like(x)
                k[(1,)](x, y, x.numel(), BLOCK=1024)
                return y
    ''') == [(6, "patching")]


def test_extra_file_outside_the_candidate_directory_and_unreadable_extra(tmp_path):
    (tmp_path / "cand").mkdir()
    (tmp_path / "other").mkdir()
    top = tmp_path / "cand" / "top.py"
    top.write_text("from elsewhere import ModelNew\n")
    extra = tmp_path / "other" / "side.py"
    extra.write_text("import threading\n")
    out = check_file(str(top), extra_files=[str(extra)])
    assert [(v["file"], v["line"], v["rule"]) for v in out] == [
        (str(top), 1, "no-triton-launch"), (str(extra), 1, "threads")]
    with pytest.raises(OSError):
        check_file(str(top), extra_files=[str(tmp_path / "nope.py")])


def test_packing_is_allowed_only_in_a_composed_packages_top_level(tmp_path):
    """torch.cat/stack in decomposed_solution.py beside subkernel_implementations/
    pack subproblem outputs (the decomposition verifier's rule, toplevel.py);
    the same forward anywhere else is PyTorch compute."""
    entry = os.path.join(FIXTURES, "clean", "pkg_cat", "decomposed_solution.py")
    assert check_file(entry) == []
    lone = tmp_path / "decomposed_solution.py"  # no subkernel_implementations/ beside it
    lone.write_text("""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        k[(1,)](x, x.numel(), BLOCK=64)
        return torch.cat([x, x], dim=1)
""")
    rules = {v["rule"] for v in check_file(str(lone))}
    assert "torch-compute" in rules, rules
