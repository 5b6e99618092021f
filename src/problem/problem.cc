#include "problem/problem.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "util/fs.h"
#include "util/hash.h"
#include "util/strings.h"

namespace mk::problem {

namespace {

std::string camel(const std::string& name) {
  std::string out;
  bool up = true;
  for (char c : name) {
    if (c == '_') {
      up = true;
      continue;
    }
    out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return out.empty() ? "Sub" : out;
}

bool has_def(const std::string& src, const std::string& fn) {
  std::regex re("(^|\\n)\\s*def\\s+" + fn + "\\s*\\(");
  return std::regex_search(src, re);
}

bool has_class(const std::string& src, const std::string& cls) {
  std::regex re("(^|\\n)class\\s+" + cls + "\\s*[(:]");
  return std::regex_search(src, re);
}

/// Normalises a path an LLM wrote: "./x", "solution/x", backslashes.
std::string normalise_path(std::string p) {
  std::replace(p.begin(), p.end(), '\\', '/');
  while (p.rfind("./", 0) == 0) p = p.substr(2);
  for (const char* prefix : {"solution/", "decomposition/", "output/"}) {
    if (p.rfind(prefix, 0) == 0) p = p.substr(std::string(prefix).size());
  }
  return p;
}

}  // namespace

bool valid_subproblem_name(const std::string& s) {
  static const std::set<std::string> kKeywords = {
      "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else",
      "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
      "not", "or", "pass", "raise", "return", "try", "while", "with", "yield", "torch", "triton"};
  static const std::regex re("[a-z_][a-z0-9_]*");
  return !s.empty() && s.size() <= 64 && std::regex_match(s, re) && !kKeywords.count(s) && s != "__init__";
}

Result<Problem> Problem::load(const fs::path& path) {
  auto src = read_file(path);
  if (!src) return Error{src.error()};
  if (!has_class(*src, "Model"))
    return Error{fmt::format("{}: not a KernelBench problem: no `class Model(...)` found", path.string())};
  if (!has_def(*src, "get_inputs") || !has_def(*src, "get_init_inputs"))
    return Error{fmt::format("{}: not a KernelBench problem: it must define get_inputs() and get_init_inputs()",
                             path.string())};
  return from_source(path.stem().string(), std::move(*src), path);
}

Problem Problem::from_source(std::string name, std::string source, fs::path path) {
  Problem p;
  p.path = std::move(path);
  p.hash = sha256_hex(source);
  p.source = std::move(source);
  p.name = std::move(name);
  return p;
}

Subproblem Subproblem::make(std::string name, std::string source) {
  Subproblem s;
  s.name = std::move(name);
  s.hash = sha256_hex(source);
  s.multi_config = has_def(source, "get_input_configs");
  s.source = std::move(source);
  return s;
}

const Subproblem* Topology::find(const std::string& name) const {
  for (const auto& s : subproblems)
    if (s.name == name) return &s;
  return nullptr;
}

std::vector<std::string> Topology::names() const {
  std::vector<std::string> out;
  for (const auto& s : subproblems) out.push_back(s.name);
  return out;
}

Status write_file_plain(const fs::path& path, const std::string& content) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) {
    int e = errno;
    return Error{fmt::format("cannot write {}{}", path.string(), e ? std::string(": ") + std::strerror(e) : "")};
  }
  return Status::Ok();
}

Status Topology::write_to(const fs::path& dir, bool durable) const {
  std::error_code ec;
  fs::remove_all(dir / "subkernel_problems", ec);
  auto w = [&](const fs::path& p, const std::string& c) { return durable ? write_file_atomic(p, c) : write_file_plain(p, c); };
  if (auto st = w(dir / "decomposed_problem.py", top_level); !st) return st;
  if (auto st = w(dir / "subkernel_problems" / "__init__.py", ""); !st) return st;
  for (const auto& s : subproblems) {
    if (auto st = w(dir / s.file(), s.source); !st) return st;
  }
  return Status::Ok();
}

nlohmann::json Topology::to_json() const {
  nlohmann::json subs = nlohmann::json::array();
  for (const auto& s : subproblems) {
    subs.push_back({{"name", s.name}, {"hash", s.hash}, {"multi_config", s.multi_config}, {"source", s.source}});
    if (!s.input_layouts.is_null()) subs.back()["input_layouts"] = s.input_layouts;
  }
  return {{"top_level", top_level}, {"monolithic", monolithic}, {"origin", origin}, {"subproblems", subs}};
}

Result<Topology> Topology::from_json(const nlohmann::json& j) {
  try {
    Topology t;
    t.top_level = j.at("top_level").get<std::string>();
    t.monolithic = j.value("monolithic", false);
    t.origin = j.value("origin", "");
    for (const auto& s : j.at("subproblems")) {
      t.subproblems.push_back(Subproblem::make(s.at("name").get<std::string>(), s.at("source").get<std::string>()));
      if (s.contains("input_layouts")) t.subproblems.back().input_layouts = s["input_layouts"];
    }
    return t;
  } catch (const std::exception& e) {
    return Error{std::string("topology snapshot: ") + e.what()};
  }
}

Topology Topology::wrap_original(const Problem& p, const std::string& name) {
  std::string alias = camel(name);
  Topology t;
  t.monolithic = true;
  t.origin = "fallback";
  t.top_level = fmt::format(
      "# Top level of a monolithic decomposition: the original module is the only subproblem.\n"
      "import torch.nn as nn\n"
      "\n"
      "from subkernel_problems.{0} import Model as {1}\n"
      "\n"
      "\n"
      "class ModelNew(nn.Module):\n"
      "    def __init__(self, *args, **kwargs):\n"
      "        super().__init__()\n"
      "        self.{0} = {1}(*args, **kwargs)\n"
      "\n"
      "    def forward(self, *args, **kwargs):\n"
      "        return self.{0}(*args, **kwargs)\n",
      name, alias);
  t.subproblems.push_back(Subproblem::make(name, p.source));
  return t;
}

Result<std::vector<TopImport>> parse_top_imports(const std::string& top_level) {
  static const std::regex from_re(R"(^\s*from\s+(\.?)subkernel_problems\.([A-Za-z_][A-Za-z0-9_]*)\s+import\s+\(?\s*([^)#]*?)\s*\)?\s*(#.*)?$)");
  static const std::regex item_re(R"(^Model(\s+as\s+([A-Za-z_][A-Za-z0-9_]*))?$)");
  std::vector<TopImport> out;
  std::set<std::string> seen;
  auto lines = split_lines(top_level);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    int ln = static_cast<int>(i + 1);
    std::smatch m;
    if (line.find("sys.path") != std::string::npos)
      return Error{fmt::format("decomposed_problem.py line {}: do not modify sys.path; import subproblems as "
                               "`from subkernel_problems.<name> import Model as <Alias>`", ln)};
    if (std::regex_match(line, m, from_re)) {
      std::string name = m[2];
      std::string items = m[3];
      std::smatch im;
      if (!std::regex_match(items, im, item_re))
        return Error{fmt::format("decomposed_problem.py line {}: import only the class, as "
                                 "`from subkernel_problems.{} import Model as <Alias>` (found `import {}`)",
                                 ln, name, items)};
      if (!valid_subproblem_name(name))
        return Error{fmt::format("decomposed_problem.py line {}: `{}` is not a usable subproblem name; use a "
                                 "lower-case Python identifier such as linear_gelu", ln, name)};
      if (!seen.insert(name).second)
        return Error{fmt::format("decomposed_problem.py line {}: subkernel_problems.{} is imported twice; import "
                                 "each subproblem once and instantiate it as often as needed", ln, name)};
      out.push_back({name, im[2].matched ? std::string(im[2]) : std::string("Model"), ln});
      continue;
    }
    bool is_import = std::regex_search(line, std::regex(R"(^\s*(from|import)\s)"));
    if (is_import && line.find("subkernel_problems") != std::string::npos)
      return Error{fmt::format("decomposed_problem.py line {}: unsupported import `{}`; write exactly "
                               "`from subkernel_problems.<name> import Model as <Alias>`", ln, line)};
  }
  if (!has_class(top_level, "ModelNew"))
    return Error{"decomposed_problem.py: no `class ModelNew(nn.Module)` found; the top level must define ModelNew"};
  if (out.empty())
    return Error{"decomposed_problem.py imports no subproblem; import each one as "
                 "`from subkernel_problems.<name> import Model as <Alias>`"};
  return out;
}

Result<Topology> topology_from_files(const std::map<std::string, std::string>& raw_files, const Topology* base,
                                     std::string origin) {
  std::map<std::string, std::string> files;
  for (const auto& [path, src] : raw_files) files[normalise_path(path)] = src;

  std::string top;
  if (auto it = files.find("decomposed_problem.py"); it != files.end()) {
    top = it->second;
  } else if (base) {
    top = base->top_level;
  } else {
    return Error{"the reply has no decomposed_problem.py; give the top-level module in a block tagged "
                 "`file=decomposed_problem.py`"};
  }
  std::set<std::string> given;
  static const std::regex sub_re(R"(^subkernel_problems/([^/]+)\.py$)");
  for (const auto& [path, src] : files) {
    if (path == "decomposed_problem.py") continue;
    std::smatch m;
    if (path == "subkernel_problems/__init__.py") continue;
    if (!std::regex_match(path, m, sub_re))
      return Error{fmt::format("unexpected file `{}`: only decomposed_problem.py and "
                               "subkernel_problems/<name>.py are allowed", path)};
    if (!valid_subproblem_name(m[1]))
      return Error{fmt::format("`{}`: `{}` is not a usable subproblem name; use a lower-case Python identifier",
                               path, std::string(m[1]))};
    given.insert(m[1]);
  }

  auto imports = parse_top_imports(top);
  if (!imports) return Error{imports.error()};

  Topology t;
  t.top_level = top;
  t.origin = std::move(origin);
  std::set<std::string> used;
  for (const auto& imp : *imports) {
    std::string path = "subkernel_problems/" + imp.module + ".py";
    std::string src;
    if (auto it = files.find(path); it != files.end()) {
      src = it->second;
    } else if (base && base->find(imp.module)) {
      src = base->find(imp.module)->source;
    } else {
      return Error{fmt::format("decomposed_problem.py line {} imports subkernel_problems.{} but the reply has "
                               "no file {}", imp.line, imp.module, path)};
    }
    if (!has_class(src, "Model"))
      return Error{fmt::format("{}: no `class Model(nn.Module)`; every subproblem file defines Model", path)};
    bool configs = has_def(src, "get_input_configs");
    if (!configs && (!has_def(src, "get_inputs") || !has_def(src, "get_init_inputs")))
      return Error{fmt::format("{}: define get_inputs() and get_init_inputs(), or get_input_configs() when the "
                               "top level instantiates it more than once", path)};
    used.insert(imp.module);
    t.subproblems.push_back(Subproblem::make(imp.module, src));
  }
  for (const auto& g : given) {
    if (!used.count(g))
      return Error{fmt::format("subkernel_problems/{}.py is not imported by decomposed_problem.py; import it or "
                               "leave it out", g)};
  }
  t.monolithic = false;
  return t;
}

nlohmann::json TopologyDiff::to_json() const {
  return {{"added", added}, {"removed", removed}, {"changed", changed}, {"kept", kept},
          {"top_level_changed", top_level_changed}};
}

TopologyDiff diff(const Topology& before, const Topology& after) {
  TopologyDiff d;
  d.top_level_changed = before.top_level != after.top_level;
  for (const auto& s : after.subproblems) {
    const Subproblem* old = before.find(s.name);
    if (!old) d.added.push_back(s.name);
    else if (old->hash != s.hash) d.changed.push_back(s.name);
    else d.kept.push_back(s.name);
  }
  for (const auto& s : before.subproblems)
    if (!after.find(s.name)) d.removed.push_back(s.name);
  return d;
}

}  // namespace mk::problem
