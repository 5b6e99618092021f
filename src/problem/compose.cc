#include "problem/compose.h"

#include <unistd.h>

#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "util/fs.h"
#include "util/hash.h"

namespace mk::problem {

Result<std::string> rewrite_top_level_for_solution(const std::string& top_level) {
  auto imports = parse_top_imports(top_level);
  if (!imports) return Error{imports.error()};
  std::istringstream in(top_level);
  std::string line, out;
  int ln = 0;
  size_t next = 0;
  while (std::getline(in, line)) {
    ++ln;
    if (next < imports->size() && (*imports)[next].line == ln) {
      const auto& imp = (*imports)[next++];
      size_t indent = line.find_first_not_of(" \t");
      out += line.substr(0, indent == std::string::npos ? 0 : indent);
      out += fmt::format("from .subkernel_implementations.{} import ModelNew as {}\n", imp.module, imp.alias);
      continue;
    }
    out += line + "\n";
  }
  return out;
}

std::string pytorch_implementation(const Subproblem& sp) {
  return sp.source +
         "\n\n"
         "# Swap: this subkernel runs the PyTorch reference above. It passes the evaluator only\n"
         "# under the allow_pytorch policy, and the solution is marked as containing PyTorch.\n"
         "class ModelNew(Model):\n"
         "    pass\n";
}

Status write_solution_package(const fs::path& package_dir, const Topology& topo,
                              const std::map<std::string, std::string>& kernels,
                              const SolutionManifest& manifest, bool durable) {
  for (const auto& sp : topo.subproblems) {
    if (!kernels.count(sp.name))
      return Error{fmt::format("cannot compose {}: no kernel for subproblem {}", package_dir.string(), sp.name)};
  }
  auto top = rewrite_top_level_for_solution(topo.top_level);
  if (!top) return Error{fmt::format("cannot compose {}: {}", package_dir.string(), top.error())};

  fs::path tmp = package_dir;
  tmp += fmt::format(".tmp-{}", ::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);

  nlohmann::json man = manifest.extra.is_object() ? manifest.extra : nlohmann::json::object();
  man["subkernels"] = nlohmann::json::array();
  man["contains_pytorch_subkernels"] = !manifest.pytorch_subkernels.empty();
  man["monolithic"] = topo.monolithic;

  auto w = [&](const fs::path& rel, const std::string& content) -> Status {
    return durable ? write_file_atomic(tmp / rel, content) : write_file_plain(tmp / rel, content);
  };
  Status st = w("__init__.py",
                "\"\"\"MKEvolve solution package. Import ModelNew from .decomposed_solution; each subkernel is a\n"
                "self-contained ModelNew in subkernel_implementations/, its PyTorch reference in\n"
                "subkernel_problems/.\"\"\"\n");
  if (st) st = w("decomposed_solution.py", *top);
  if (st) st = w("subkernel_implementations/__init__.py", "");
  if (st) st = w("subkernel_problems/__init__.py", "");
  for (const auto& sp : topo.subproblems) {
    const std::string& k = kernels.at(sp.name);
    if (st) st = w("subkernel_implementations/" + sp.name + ".py", k);
    if (st) st = w("subkernel_problems/" + sp.name + ".py", sp.source);
    man["subkernels"].push_back({{"name", sp.name},
                                 {"problem_hash", sp.hash},
                                 {"kernel_hash", sha256_hex(k)},
                                 {"pytorch", manifest.pytorch_subkernels.count(sp.name) > 0}});
  }
  if (st) st = w("manifest.json", man.dump(2) + "\n");
  if (!st) {
    fs::remove_all(tmp, ec);
    return st;
  }
  fs::remove_all(package_dir, ec);
  fs::create_directories(package_dir.parent_path(), ec);
  fs::rename(tmp, package_dir, ec);
  if (ec) return Error{fmt::format("cannot move {} into place: {}", package_dir.string(), ec.message())};
  return Status::Ok();
}

}  // namespace mk::problem
