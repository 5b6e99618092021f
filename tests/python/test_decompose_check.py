"""Tests for mkevolve_worker.decompose_check (LLMDecompose verification).

Runs on CPU with torch 1.13 (`/usr/bin/python3 -m pytest -q tests/python/test_decompose_check.py`)
and on a GPU machine with torch 2.x, where the default device is cuda.
"""

import json
import os
import re
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "worker"))

torch = pytest.importorskip("torch")

from mkevolve_worker import decompose_check as dc  # noqa: E402

FIX = os.path.join(HERE, "decomp_fixtures")
PROBLEMS = {"mlp": "mlp.py", "conv": "convnet.py", "res": "resblocks.py",
            "attn": "attention.py", "gsm": "gelu_softmax.py", "mish": "mish_head.py",
            "views": "views.py"}


def problem_for(name):
    return os.path.join(FIX, "problems", PROBLEMS[name.split("_")[0]])


def verify(name, root=None, **options):
    root = root or os.path.join(FIX, name)
    return dc.verify_decomposition(problem_for(name), os.path.join(root, "decomposed_problem.py"),
                                   os.path.join(root, "subkernel_problems"), options)


def copy_fixture(name, tmp_path):
    dst = tmp_path / name
    shutil.copytree(os.path.join(FIX, name), dst)
    return dst


def edit(path, old, new):
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


def only_failure(result):
    assert not result["ok"]
    assert len(result["failures"]) == 1, result["failures"]
    return result["failures"][0]


# -- correct decompositions -------------------------------------------------

@pytest.mark.parametrize("name", ["mlp_good", "conv_good", "res_good", "attn_good",
                                  "mlp_fallback"])
def test_correct_decompositions_pass(name):
    result = verify(name)
    assert result["failures"] == []
    assert result["ok"] is True
    assert result["max_abs_err"] == 0.0
    for info in result["subproblems"].values():
        assert info["covered"] is True
        assert info["instances"] >= 1


def test_result_reports_instances_init_args_and_shapes():
    subs = verify("mlp_good", device="cpu")["subproblems"]
    assert set(subs) == {"linear", "linear_gelu"}
    gelu = subs["linear_gelu"]
    assert gelu["instances"] == 2
    assert gelu["init_args_seen"] == [[64, 48], [48, 32]]
    assert gelu["input_shapes_seen"] == [[{"shape": [8, 64], "dtype": "float32"}],
                                         [{"shape": [8, 48], "dtype": "float32"}]]
    assert subs["linear"]["init_args_seen"] == [[32, 10]]


def test_input_layouts_seen_record_the_views_the_top_level_passes():
    # The top level hands each subproblem a view of x (4, 8, 16): a transpose, a
    # permute, a slice; the evaluation of its subkernel reproduces these strides.
    result = verify("views_good")
    assert result["ok"], result["failures"]
    subs = result["subproblems"]
    assert subs["tanh"]["input_layouts_seen"] == [[
        {"shape": [8, 4, 16], "stride": [16, 128, 1], "offset": 0, "dtype": "float32",
         "contiguous": False}]]
    assert subs["relu_scale"]["input_layouts_seen"] == [[
        {"shape": [16, 4, 8], "stride": [1, 128, 16], "offset": 0, "dtype": "float32",
         "contiguous": False}]]
    assert subs["linear"]["input_layouts_seen"] == [[
        {"shape": [4, 6, 16], "stride": [128, 16, 1], "offset": 32, "dtype": "float32",
         "contiguous": False}]]
    # One entry per distinct call (two trials, one layout), one per argument;
    # plain values are null.
    gelu = verify("mlp_good")["subproblems"]["linear_gelu"]["input_layouts_seen"]
    assert gelu == [[{"shape": [8, 64], "stride": [64, 1], "offset": 0, "dtype": "float32",
                      "contiguous": True}],
                    [{"shape": [8, 48], "stride": [48, 1], "offset": 0, "dtype": "float32",
                      "contiguous": True}]]


def test_input_layouts_seen_has_null_for_plain_values(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    linear = root / "subkernel_problems" / "linear.py"
    edit(linear, "def forward(self, x):", "def forward(self, x, scale=1.0):")
    edit(linear, "return self.linear(x)", "return self.linear(x) * scale")
    edit(root / "decomposed_problem.py", "return self.fc(x)", "return self.fc(x, scale=1.0)")
    result = verify("conv_good", root=root)
    assert result["ok"], result["failures"]
    [call] = result["subproblems"]["linear"]["input_layouts_seen"]
    assert call[1] is None and call[0]["shape"] == [4, 512] and call[0]["contiguous"] is True


def test_identical_instances_may_share_one_get_inputs():
    # res_good builds its block three times with the same args and inputs.
    subs = verify("res_good")["subproblems"]
    assert subs["residual_linear_relu"]["instances"] == 3
    assert subs["residual_linear_relu"]["init_args_seen"] == [[32, 0.25]]


def test_result_is_strict_json():
    json.dumps(verify("mlp_bad_rng_order"), allow_nan=False)


# -- check 2: functional equivalence ------------------------------------------

def test_wrong_rng_order_names_the_first_differing_parameter():
    result = verify("mlp_bad_rng_order")
    assert not result["ok"]
    assert any("differs from Model's on trial 0" in f for f in result["failures"])
    assert any(f.startswith("decomposed_problem.py: parameter #0 of Model (`fc1.weight`, "
                            "shape [48, 64])") and "same order" in f
               for f in result["failures"]), result["failures"]


def test_output_mismatch_with_identical_parameters_blames_forward():
    # The tanh GELU where the original has the exact one: ~4e-5 off at the output,
    # four times the decomposition's bound (a tenth of fp32's 1e-4).
    line = only_failure(verify("mlp_bad_mismatch"))
    assert line.startswith("decomposed_problem.py: the output of ModelNew differs")
    assert "exceeds the decomposition bound atol 1e-05 + rtol 1e-05 x |ref|" in line
    assert "parameters are identical" in line
    assert verify("mlp_bad_mismatch")["max_abs_err"] > 0


# Honest re-expressions, as LLMs write them, differ from the original by rounding
# only: they pass within a tenth of the evaluator's tolerance (they failed when
# exact equality was required).

def test_erf_gelu_and_written_out_softmax_are_accepted_with_their_error():
    result = verify("gsm_good")
    assert result["failures"] == [] and result["ok"] is True
    assert 0 < result["max_abs_err"] < 1e-6
    tol = result["tolerance"]
    assert tol["fraction"] == 0.1
    [out] = tol["outputs"]
    assert out["output"] == "output" and out["dtype"] == "float32"
    assert out["atol"] == pytest.approx(1e-5) and out["rtol"] == pytest.approx(1e-5)
    assert out["problem_atol"] == 1e-4 and out["problem_rtol"] == 1e-4
    assert out["source"] == {"atol": "float32 default", "rtol": "float32 default"}
    assert out["max_abs_err"] == result["max_abs_err"]
    assert 0 < out["max_rel_err"] < 1e-4


def test_sigmoid_gelu_is_rejected_naming_the_error_and_the_bound():
    # GELU approximated as x * sigmoid(1.702 x): a different function, ~2e-3 off.
    result = verify("gsm_bad_sigmoid_gelu")
    line = only_failure(result)
    m = re.search(r"max abs err (\S+) exceeds the decomposition bound atol 1e-05 \+ rtol 1e-05 "
                  r"x \|ref\| \(a tenth of the evaluator's float32 tolerance, atol 0.0001 rtol "
                  r"0.0001\)", line)
    assert m, line
    assert float(m.group(1)) == pytest.approx(result["max_abs_err"], rel=1e-2)
    assert result["max_abs_err"] > 1e-4
    assert result["tolerance"]["outputs"][0]["max_abs_err"] == result["max_abs_err"]


@pytest.mark.parametrize("name", ["mlp_good_matmul", "mish_good_split", "attn_good_explicit"])
def test_other_honest_reexpressions_are_accepted(name):
    # Linear as matmul + bias; Mish as v * n / (n + 2) and a split row sum;
    # nn.MultiheadAttention written out (two outputs, each with its own record).
    result = verify(name)
    assert result["failures"] == [] and result["ok"] is True
    outputs = result["tolerance"]["outputs"]
    assert [o["output"] for o in outputs] == (["output[0]", "output[1]"]
                                              if name.startswith("attn") else ["output"])
    assert all(o["dtype"] == "float32" and o["atol"] == pytest.approx(1e-5) for o in outputs)
    assert result["max_abs_err"] == max(o["max_abs_err"] for o in outputs)


def test_fraction_zero_demands_exact_equality():
    line = only_failure(verify("gsm_good", decompose_tol_fraction=0))
    assert "exact equality is required under the same seeding (decompose_tol_fraction is 0)" \
        in line
    assert verify("gsm_good", decompose_tol_fraction=0)["tolerance"]["outputs"][0]["atol"] == 0


def test_problem_tolerance_and_explicit_tolerance_set_the_bound(tmp_path):
    # The bound is a fraction of the problem's own MKEVOLVE_TOLERANCE...
    problem = tmp_path / "gelu_softmax.py"
    shutil.copy(problem_for("gsm"), problem)
    with open(problem, "a") as fh:
        fh.write('\nMKEVOLVE_TOLERANCE = {"atol": 0.05, "rtol": 0.0}\n')
    root = os.path.join(FIX, "gsm_bad_sigmoid_gelu")
    args = (str(problem), os.path.join(root, "decomposed_problem.py"),
            os.path.join(root, "subkernel_problems"))
    result = dc.verify_decomposition(*args, {})
    assert result["ok"], result["failures"]
    [out] = result["tolerance"]["outputs"]
    assert out["atol"] == pytest.approx(0.005) and out["rtol"] == 0
    assert out["source"] == {"atol": "problem", "rtol": "problem"}
    # ...and explicit atol/rtol (the run's --atol/--rtol) replace it, scaled alike.
    line = only_failure(dc.verify_decomposition(*args, {"atol": 1e-3, "rtol": 1e-3}))
    assert "atol 0.0001 + rtol 0.0001 x |ref| (a tenth of the tolerance the run was given" in line
    # A bad declaration or option is named.
    bad = dc.verify_decomposition(*args, {"decompose_tol_fraction": -1})
    assert bad["failures"] == ["options.decompose_tol_fraction must be a non-negative number, "
                               "not -1"]


def test_tolerance_option_accepts_small_differences():
    result = verify("mlp_bad_mismatch", atol=1e-3, rtol=1e-3)
    assert result["ok"], result["failures"]
    assert 0 < result["max_abs_err"] < 1e-3


def test_wrong_output_shape(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    edit(root / "decomposed_problem.py", "return self.fc(x)", "return self.fc(x).view(2, -1)")
    result = verify("conv_good", root=root)
    assert only_failure(result) == ("decomposed_problem.py: the output of ModelNew has shape "
                                    "(2, 20), Model's has (4, 10)")
    assert result["max_abs_err"] == -1.0


def test_second_output_mismatch_is_named(tmp_path):
    root = copy_fixture("attn_good", tmp_path)
    edit(root / "decomposed_problem.py", "return self.head(x), x", "return self.head(x), x[:, :15]")
    line = only_failure(verify("attn_good", root=root))
    assert line == ("decomposed_problem.py: output #1 of ModelNew has shape (2, 15, 32), Model's "
                    "has (2, 16, 32)")


def test_nothing_compared_when_model_new_fails(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    edit(root / "decomposed_problem.py", "x = self.features(x)", "x = self.features(x, 3)")
    result = verify("conv_good", root=root)
    assert result["max_abs_err"] == -1.0
    assert result["failures"][0].startswith(
        "decomposed_problem.py: ModelNew(*get_init_inputs())(*get_inputs()) raised TypeError")
    assert "(at decomposed_problem.py line 14)" in result["failures"][0]


def test_dropout_is_reproduced_under_the_same_seed():
    # resblocks applies dropout in train mode (KernelBench does not call eval()).
    assert verify("res_good", trials=3)["ok"]


# -- check 3: the top level does no math, holds only subproblems ------------------

def test_torch_call_in_forward_is_reported_once():
    line = only_failure(verify("conv_bad_torch_relu"))
    assert line.startswith("decomposed_problem.py line 16: ModelNew.forward calls `torch.relu`")


def test_arithmetic_in_forward_is_caught_at_runtime():
    line = only_failure(verify("res_bad_toplevel_add"))
    assert line.startswith("decomposed_problem.py line 19: the top level runs `Tensor.")
    assert "outside any subproblem" in line


def test_nn_linear_in_top_level():
    line = only_failure(verify("mlp_bad_nn_linear"))
    assert line.startswith("decomposed_problem.py line 11: ModelNew.__init__ calls "
                           "`nn.Linear(...)`")


def test_module_list_in_top_level():
    line = only_failure(verify("res_bad_modulelist"))
    assert line.startswith("decomposed_problem.py line 11: ModelNew.__init__ calls "
                           "`nn.ModuleList(...)`")


def test_matmul_operator_in_forward(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    edit(root / "decomposed_problem.py", "return self.fc(x)", "return self.fc(x @ x.t() @ x)")
    result = verify("conv_good", root=root)
    assert any(f.startswith("decomposed_problem.py line 16: ModelNew.forward uses the `@`")
               for f in result["failures"]), result["failures"]


def test_math_hidden_in_a_helper_function_is_caught(tmp_path):
    # A helper defined in a subproblem file but called by the top level is still top-level math.
    root = copy_fixture("conv_good", tmp_path)
    with open(root / "subkernel_problems" / "linear.py", "a") as fh:
        fh.write("\n\ndef scale(t):\n    return t * 1.0\n")
    edit(root / "decomposed_problem.py", "from subkernel_problems.linear import Model as Linear",
         "from subkernel_problems.linear import Model as Linear, scale")
    edit(root / "decomposed_problem.py", "return self.fc(x)", "return self.fc(scale(x))")
    line = only_failure(verify("conv_good", root=root))
    assert line.startswith("subkernel_problems/linear.py line 23: the top level runs `Tensor.")


def test_views_slices_and_shape_queries_are_allowed(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    edit(root / "decomposed_problem.py", "x = x.view(x.size(0), -1)",
         "n, c, h, w = x.shape\n"
         "        x = x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)\n"
         "        x = x[:, :, :, :].reshape(n, c * h * w).unsqueeze(0).squeeze(0)")
    assert verify("conv_good", root=root)["failures"] == []


def test_packing_and_unpacking_in_top_level_are_allowed(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    edit(root / "decomposed_problem.py", "x = x.view(x.size(0), -1)",
         "x = x.view(x.size(0), -1)\n        x = x.split(256, dim=1)\n"
         "        x = __import__('torch').cat(x, dim=1)")
    assert verify("conv_good", root=root)["failures"] == []


@pytest.mark.parametrize("expr,op", [
    ("x.view(x.size(0), -1) * 1", "Tensor."),
    ("x.view(x.size(0), -1).double().float()", "Tensor.double"),
    ("x.view(x.size(0), -1)[:, __import__('torch').arange(512)]", "Tensor.__getitem__"),
    ("x.view(x.size(0), -1).repeat(1, 1)", "Tensor.repeat"),
])
def test_runtime_tracer_flags_math(tmp_path, expr, op):
    root = copy_fixture("conv_good", tmp_path)
    edit(root / "decomposed_problem.py", "x = x.view(x.size(0), -1)", "x = " + expr)
    line = only_failure(verify("conv_good", root=root))
    assert line.startswith("decomposed_problem.py line 15: the top level runs `")
    assert f"`{op}" in line


def test_subproblem_constructed_in_forward(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    edit(root / "decomposed_problem.py", "return self.fc(x)", "return Linear(512, 10)(x)")
    result = verify("conv_good", root=root)
    assert ("decomposed_problem.py line 16: ModelNew.forward calls `Linear(...)` directly; "
            "construct subproblem Models once in ModelNew.__init__ and call those instances"
            ) in result["failures"]


def test_unregistered_subproblem_instance(tmp_path):
    root = copy_fixture("res_good", tmp_path)
    edit(root / "decomposed_problem.py", '            setattr(self, f"block_{i}", block)\n', "")
    result = verify("res_good", root=root, device="cpu")
    assert any("is not registered as a submodule of ModelNew" in f
               and f.startswith("decomposed_problem.py: the subkernel_problems/"
                                "residual_linear_relu.py Model built with (32, 0.25)")
               for f in result["failures"]), result["failures"]


def test_parameter_owned_by_top_level(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    edit(root / "decomposed_problem.py", "        self.features = ConvReluPool",
         "        self.register_parameter('w', None)\n        self.features = ConvReluPool")
    line = only_failure(verify("conv_good", root=root))
    assert line.startswith("decomposed_problem.py line 10: ModelNew.__init__ calls "
                           "`self.register_parameter`")


# -- checks 4 and 5: coverage of inputs and constructor args -----------------------

def test_wrong_get_inputs_shape():
    line = only_failure(verify("conv_bad_inputs_shape"))
    assert line == ("subkernel_problems/conv_relu_pool.py: ModelNew calls it with inputs "
                    "[(4, 3, 16, 16) float32] but get_inputs() returns [(4, 3, 32, 32) float32]")


def test_wrong_init_args():
    line = only_failure(verify("conv_bad_init_args"))
    assert line == ("subkernel_problems/linear.py: ModelNew builds Model(512, 10) but "
                    "get_init_inputs() returns (512, 12)")


def test_missing_get_input_configs():
    line = only_failure(verify("mlp_bad_no_configs"))
    assert line.startswith("subkernel_problems/linear_gelu.py: ModelNew builds Model 2 times "
                           "with different arguments")
    assert "(64, 48), (48, 32)" in line and "get_input_configs()" in line


def test_configs_pairing_init_and_inputs_inconsistently():
    failures = verify("mlp_bad_config_pairing")["failures"]
    pairing = [f for f in failures if "pairs those inputs with different init args" in f]
    assert len(pairing) == 2, failures
    assert pairing[0].startswith("subkernel_problems/linear_gelu.py: the instance built with "
                                 "(64, 48) is called with inputs [(8, 64) float32]")
    assert any("entry #0: Model(*get_init_inputs())(*get_inputs()) raised RuntimeError" in f
               for f in failures)


def test_config_missing_for_one_instance(tmp_path):
    root = copy_fixture("mlp_good", tmp_path)
    edit(root / "subkernel_problems" / "linear_gelu.py",
         '        {"get_init_inputs": lambda: [48, 32], "get_inputs": lambda: [torch.randn(8, 48)]},\n',
         "")
    line = only_failure(verify("mlp_good", root=root))
    assert line == ("subkernel_problems/linear_gelu.py: ModelNew builds Model(48, 32) but no "
                    "get_input_configs() entry has get_init_inputs() returning those args "
                    "(entries return (64, 48))")


def test_default_arguments_are_normalised(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    linear = root / "subkernel_problems" / "linear.py"
    edit(linear, "def __init__(self, in_features, out_features):",
         "def __init__(self, in_features, out_features, bias=True):")
    edit(linear, "nn.Linear(in_features, out_features)", "nn.Linear(in_features, out_features, bias)")
    edit(linear, "return [512, 10]", "return [512, 10, True]")
    result = verify("conv_good", root=root)
    assert result["ok"], result["failures"]
    assert result["subproblems"]["linear"]["init_args_seen"] == [[512, 10, True]]


def test_keyword_and_scalar_forward_arguments_are_captured(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    linear = root / "subkernel_problems" / "linear.py"
    edit(linear, "def forward(self, x):", "def forward(self, x, scale=1.0):")
    edit(linear, "return self.linear(x)", "return self.linear(x) * scale")
    edit(root / "decomposed_problem.py", "return self.fc(x)", "return self.fc(x, scale=1.0)")
    # get_inputs() leaves scale at its default, which equals what ModelNew passes.
    result = verify("conv_good", root=root)
    assert result["ok"], result["failures"]
    assert result["subproblems"]["linear"]["input_shapes_seen"] == [
        [{"shape": [4, 512], "dtype": "float32"}, 1.0]]
    edit(linear, "return [torch.randn(4, 512)]", "return [torch.randn(4, 512), 2.0]")
    line = only_failure(verify("conv_good", root=root))
    assert line == ("subkernel_problems/linear.py: ModelNew calls it with inputs "
                    "[(4, 512) float32, 1.0] but get_inputs() returns [(4, 512) float32, 2.0]")


# -- checks 1, 6, 7: files, standalone runs, trivial and unused subproblems ----------

def test_missing_functions_in_subproblem_file():
    line = only_failure(verify("conv_bad_missing_funcs"))
    assert line.startswith("subkernel_problems/linear.py: missing get_init_inputs;")


def test_trivial_flatten_subproblem():
    line = only_failure(verify("conv_bad_trivial_flatten"))
    assert line.startswith("subkernel_problems/flatten.py: Model.forward does no computation")


def test_unused_subproblem_file():
    line = only_failure(verify("conv_bad_unused"))
    assert line == ("subkernel_problems/softmax.py: ModelNew never builds this Model; use it or "
                    "delete the file")


def test_subproblem_built_inside_another_subproblem(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    conv = root / "subkernel_problems" / "conv_relu_pool.py"
    edit(conv, "import torch.nn as nn\n",
         "import torch.nn as nn\n\nfrom subkernel_problems.linear import Model as Linear\n")
    edit(conv, "        self.pool = nn.MaxPool2d(2)\n",
         "        self.pool = nn.MaxPool2d(2)\n        self.unused = Linear(2, 2)\n")
    edit(root / "decomposed_problem.py", "        self.fc = Linear(", "        self.fc = nn.Linear(")
    result = verify("conv_good", root=root)
    assert ("subkernel_problems/linear.py: its Model is built only inside "
            "subkernel_problems/conv_relu_pool.py, not by ModelNew; subproblems must not use each "
            "other: build it in ModelNew.__init__ or inline its code into "
            "subkernel_problems/conv_relu_pool.py") in result["failures"], result["failures"]


def test_subproblem_with_non_finite_output(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    edit(root / "subkernel_problems" / "linear.py", "return [torch.randn(4, 512)]",
         "return [torch.full((4, 512), float('nan'))]")
    result = verify("conv_good", root=root)
    assert ("subkernel_problems/linear.py: Model(*get_init_inputs())(*get_inputs()) returns NaN "
            "or inf; the subproblem must give finite output on its own inputs") in result["failures"]


def test_syntax_error_in_subproblem_names_file_and_line(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    edit(root / "subkernel_problems" / "linear.py", "return self.linear(x)", "return self.linear(x")
    result = verify("conv_good", root=root)
    assert result["failures"][0].startswith("subkernel_problems/linear.py: failed to load: "
                                            "SyntaxError")
    assert "linear.py line 11" in result["failures"][0]


def test_decomposed_without_model_new(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    edit(root / "decomposed_problem.py", "class ModelNew(", "class Model(")
    result = verify("conv_good", root=root)
    assert "decomposed_problem.py: defines no `ModelNew` class (an nn.Module)" in result["failures"]


@pytest.mark.parametrize("source,trivial", [
    ("def forward(self, x):\n        return x", True),
    ("def forward(self, x):\n        return x.flatten(1)", True),
    ("def forward(self, x):\n        return torch.flatten(x, 1).contiguous()", True),
    ("def forward(self, x):\n        y = x.view(x.size(0), -1)\n        return y.clone()", True),
    ("def forward(self, x, y):\n        return x, y", True),
    ("def forward(self, x):\n        return x[:, :4]", True),
    ("def forward(self, x, y):\n        return torch.cat([x, y], dim=1)", True),
    ("def forward(self, x):\n        c = self.tok.expand(x.size(0), -1)\n        return torch.cat([c, x])",
     False),
    ("def forward(self, x):\n        return torch.relu(x)", False),
    ("def forward(self, x):\n        return self.linear(x).view(-1)", False),
    ("def forward(self, x):\n        return x * 2", False),
    ("def forward(self, x):\n        return x.sum(1)", False),
])
def test_trivial_forward_detection(source, trivial):
    import ast
    tree = ast.parse("import torch\nclass Model:\n    " + source + "\n")
    assert dc._trivial_forward(tree) is trivial


# -- isolation between calls ---------------------------------------------------------

def test_repeated_calls_do_not_see_stale_subproblem_modules():
    path_before = list(sys.path)
    assert verify("mlp_good")["ok"]
    # Same module names (subkernel_problems.linear_gelu), different code.
    assert not verify("mlp_bad_mismatch")["ok"]
    assert verify("mlp_good")["ok"]
    assert sys.path == path_before
    assert not [m for m in sys.modules if m.split(".")[0] == "subkernel_problems"]
    assert not [m for m in sys.modules if m.startswith(("_mk_problem_", "_mk_decomposed_"))]


def test_no_bytecode_written(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    verify("conv_good", root=root)
    assert not (root / "subkernel_problems" / "__pycache__").exists()
    assert not (root / "__pycache__").exists()


def test_timeout_is_reported(tmp_path):
    root = copy_fixture("conv_good", tmp_path)
    edit(root / "decomposed_problem.py", "x = self.features(x)",
         "while True:\n            pass")
    line = only_failure(verify("conv_good", root=root, timeout_s=1))
    assert line.startswith("decomposed_problem.py: verification did not finish within 1 s")


# -- the command line ---------------------------------------------------------------

def run_main(capsys, name, *extra):
    root = os.path.join(FIX, name)
    code = dc.main(["--problem", problem_for(name), "--decomposed",
                    os.path.join(root, "decomposed_problem.py"),
                    "--subproblems", os.path.join(root, "subkernel_problems"), *extra])
    return code, capsys.readouterr().out


def test_main_exit_codes_and_output(capsys):
    code, out = run_main(capsys, "mlp_good")
    assert code == 0 and out.startswith("ok: 2 subproblem(s) verified")
    code, out = run_main(capsys, "conv_bad_init_args")
    assert code == 1
    assert out.splitlines() == ["subkernel_problems/linear.py: ModelNew builds Model(512, 10) "
                                "but get_init_inputs() returns (512, 12)"]
    code, out = run_main(capsys, "conv_bad_unused", "--json")
    assert code == 1
    assert json.loads(out)["subproblems"]["softmax"]["covered"] is False


def test_main_defaults_to_the_derived_tolerance(capsys):
    code, out = run_main(capsys, "gsm_good")
    assert code == 0 and out.startswith("ok: 3 subproblem(s) verified"), out
    code, out = run_main(capsys, "gsm_good", "--tol-fraction", "0")
    assert code == 1 and "exact equality" in out
    code, out = run_main(capsys, "gsm_bad_sigmoid_gelu", "--atol", "0.05", "--rtol", "0",
                         "--tol-fraction", "1")
    assert code == 0, out


def test_main_defaults_subproblems_dir_and_accepts_a_directory(capsys):
    code = dc.main(["--problem", problem_for("conv_good"), "--decomposed",
                    os.path.join(FIX, "conv_good")])
    assert code == 0, capsys.readouterr().out


def test_main_bad_input(capsys, tmp_path):
    code, out = run_main(capsys, "mlp_good", "--device", "tpu")
    assert code == 2 and "options.device" in out
    code = dc.main(["--problem", str(tmp_path / "nope.py"), "--decomposed",
                    os.path.join(FIX, "mlp_good")])
    assert code == 2 and "problem file not found" in capsys.readouterr().out
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    code = dc.main(["--problem", str(broken), "--decomposed", os.path.join(FIX, "mlp_good")])
    out = capsys.readouterr().out
    assert code == 2 and out.startswith("broken.py: missing get_inputs, get_init_inputs")
