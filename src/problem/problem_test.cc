#include <gtest/gtest.h>

#include <fmt/format.h>

#include "problem/compose.h"
#include "problem/problem.h"
#include "support/testing.h"
#include "util/fs.h"
#include "util/subprocess.h"

namespace mk::problem {
namespace {

const char* kOriginal = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc1 = nn.Linear(in_features, out_features)
        self.fc2 = nn.Linear(out_features, out_features)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8, 16]
)";

const char* kTop = R"(import torch.nn as nn

from subkernel_problems.linear_relu import Model as LinearRelu
from subkernel_problems.linear import Model as Linear


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.a = LinearRelu(in_features, out_features)
        self.b = Linear(out_features, out_features)

    def forward(self, x):
        return self.b(self.a(x))
)";

const char* kLinearRelu = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8, 16]
)";

const char* kLinear = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16, 16]
)";

Topology two_part() {
  auto t = topology_from_files({{"decomposed_problem.py", kTop},
                                {"subkernel_problems/linear_relu.py", kLinearRelu},
                                {"subkernel_problems/linear.py", kLinear}},
                               nullptr, "decompose");
  EXPECT_TRUE(t.ok()) << t.error();
  return *t;
}

TEST(Topology, ParsesImportsInOrder) {
  auto t = two_part();
  ASSERT_EQ(t.subproblems.size(), 2u);
  EXPECT_EQ(t.subproblems[0].name, "linear_relu");
  EXPECT_EQ(t.subproblems[1].name, "linear");
  EXPECT_FALSE(t.monolithic);
}

TEST(Topology, RejectsMissingFileNamingIt) {
  auto t = topology_from_files({{"decomposed_problem.py", kTop}, {"subkernel_problems/linear.py", kLinear}},
                               nullptr, "decompose");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().find("subkernel_problems/linear_relu.py"), std::string::npos) << t.error();
}

TEST(Topology, RejectsSysPathAndOtherImportForms) {
  std::string bad = std::string("import sys\nsys.path.insert(0, '.')\n") + kTop;
  auto r = parse_top_imports(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("sys.path"), std::string::npos);
  auto r2 = parse_top_imports("from subkernel_problems import linear\nclass ModelNew(nn.Module):\n  pass\n");
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().find("line 1"), std::string::npos) << r2.error();
  auto r3 = parse_top_imports("from subkernel_problems.x import Model, get_inputs\nclass ModelNew(nn.Module):\n  pass\n");
  ASSERT_FALSE(r3.ok());
}

TEST(Topology, RejectsUnimportedFile) {
  auto t = topology_from_files({{"decomposed_problem.py", kTop},
                                {"subkernel_problems/linear_relu.py", kLinearRelu},
                                {"subkernel_problems/linear.py", kLinear},
                                {"subkernel_problems/extra.py", kLinear}},
                               nullptr, "decompose");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().find("extra.py"), std::string::npos);
}

TEST(Topology, SplitReplyReusesBaseFilesAndDiffs) {
  auto base = two_part();
  std::string new_top = kTop;
  new_top.replace(new_top.find("from subkernel_problems.linear_relu import Model as LinearRelu"),
                  std::string("from subkernel_problems.linear_relu import Model as LinearRelu").size(),
                  "from subkernel_problems.lin import Model as LinearRelu");
  auto t = topology_from_files({{"decomposed_problem.py", new_top}, {"./subkernel_problems/lin.py", kLinearRelu}},
                               &base, "split");
  ASSERT_TRUE(t.ok()) << t.error();
  auto d = diff(base, *t);
  EXPECT_EQ(d.added, std::vector<std::string>{"lin"});
  EXPECT_EQ(d.removed, std::vector<std::string>{"linear_relu"});
  EXPECT_EQ(d.kept, std::vector<std::string>{"linear"});
  EXPECT_TRUE(d.top_level_changed);
}

TEST(Topology, JsonRoundTrip) {
  auto t = two_part();
  auto back = Topology::from_json(t.to_json());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->top_level, t.top_level);
  EXPECT_EQ(back->subproblems[1].hash, t.subproblems[1].hash);
  EXPECT_TRUE(diff(t, *back).empty());
}

TEST(Compose, RewritesImportsRelative) {
  auto out = rewrite_top_level_for_solution(kTop);
  ASSERT_TRUE(out.ok());
  EXPECT_NE(out->find("from .subkernel_implementations.linear_relu import ModelNew as LinearRelu"), std::string::npos);
  EXPECT_EQ(out->find("subkernel_problems"), std::string::npos);
}

TEST(Compose, MissingKernelIsAnError) {
  mk::TempDir tmp;
  auto st = write_solution_package(tmp.path() / "solution", two_part(), {{"linear", "x"}});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("linear_relu"), std::string::npos);
}

// The package imports with relative imports and matches the original numerically
// (PyTorch subkernels, so this runs on CPU torch).
TEST(Compose, PackageImportsAndMatchesOriginal) {
  if (!mk::testing::test_python_has_torch()) GTEST_SKIP() << "no torch";
  mk::TempDir tmp;
  auto topo = two_part();
  std::map<std::string, std::string> kernels;
  for (const auto& sp : topo.subproblems) kernels[sp.name] = pytorch_implementation(sp);
  ASSERT_TRUE(write_solution_package(tmp.path() / "solution", topo, kernels).ok());
  ASSERT_TRUE(write_file_atomic(tmp.path() / "original.py", kOriginal).ok());
  ASSERT_TRUE(Topology::wrap_original(Problem::from_source("o", kOriginal)).write_to(tmp.path() / "mono").ok());
  std::string script =
      "import torch, importlib.util\n"
      "from solution.decomposed_solution import ModelNew\n"
      "spec = importlib.util.spec_from_file_location('orig', 'original.py')\n"
      "o = importlib.util.module_from_spec(spec); spec.loader.exec_module(o)\n"
      "torch.manual_seed(0); a = o.Model(*o.get_init_inputs())\n"
      "torch.manual_seed(0); b = ModelNew(*o.get_init_inputs())\n"
      "x = o.get_inputs()\n"
      "assert torch.equal(a(*x), b(*x))\n"
      "import sys; sys.path.insert(0, 'mono')\n"
      "import decomposed_problem as m\n"
      "torch.manual_seed(0); c = m.ModelNew(*o.get_init_inputs())\n"
      "assert torch.equal(a(*x), c(*x))\n"
      "print('ok')\n";
  SubprocessOptions so;
  so.argv = {mk::testing::test_python(), "-c", script};
  so.cwd = tmp.path();
  auto r = run_subprocess(so);
  EXPECT_TRUE(r.ok()) << r.describe() << r.err;
  EXPECT_NE(r.out.find("ok"), std::string::npos);
}

}  // namespace
}  // namespace mk::problem
