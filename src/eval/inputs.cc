#include "eval/inputs.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "util/env.h"
#include "util/fs.h"
#include "util/subprocess.h"

namespace mk::eval {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kPeekScript = R"PY(
import ast, json, sys

def collect(body, names, rec):
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name == "*":
                    rec["star"] = True
                else:
                    names.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                names.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.If):
            collect(node.body, names, rec)
            collect(node.orelse, names, rec)
        elif isinstance(node, ast.Try):
            collect(node.body, names, rec)
            for h in node.handlers:
                collect(h.body, names, rec)
            collect(node.orelse, names, rec)
            collect(node.finalbody, names, rec)
        elif isinstance(node, ast.With):
            collect(node.body, names, rec)

out = []
for path in sys.argv[1:]:
    rec = {"path": path, "names": [], "star": False, "error": ""}
    try:
        with open(path, "rb") as f:
            src = f.read()
        tree = ast.parse(src, filename=path)
    except SyntaxError as e:
        rec["error"] = "line %s: %s" % (e.lineno, e.msg)
    except (OSError, ValueError) as e:
        rec["error"] = str(e)
    else:
        names = set()
        collect(tree.body, names, rec)
        rec["names"] = sorted(names)
    out.append(rec)
sys.stdout.write(json.dumps(out))
)PY";

constexpr const char* kCheckScript = R"PY(
import json, sys
from mkevolve_worker.static_check import check_file
v = check_file(sys.argv[1], allow_pytorch=(sys.argv[2] == "1"))
sys.stdout.write(json.dumps([{"file": str(x.get("file", "")), "line": int(x.get("line") or 0),
                              "rule": str(x.get("rule", "")), "message": str(x.get("message", ""))} for x in v]))
)PY";

std::string tail(const std::string& s, size_t n) { return s.size() > n ? "..." + s.substr(s.size() - n) : s; }

std::string python_failure(const std::string& python, const SubprocessResult& r) {
  if (!r.spawn_error.empty())
    return "cannot run Python '" + python + "': " + r.spawn_error + " (pass --python or set MKEVOLVE_PYTHON)";
  std::string err = r.err;
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  return "Python '" + python + "' failed (" + r.describe() + ")" + (err.empty() ? "" : ": " + tail(err, 600));
}

bool has(const FileDefinitions& d, const std::string& name) {
  return std::find(d.names.begin(), d.names.end(), name) != d.names.end();
}

}  // namespace

Result<std::vector<FileDefinitions>> peek_definitions(const std::string& python, const std::vector<fs::path>& files) {
  SubprocessOptions o;
  o.argv = {python, "-I", "-c", kPeekScript};
  for (const auto& f : files) o.argv.push_back(f.string());
  o.env = scrubbed_environment();
  auto r = run_subprocess(o, {}, std::chrono::seconds(60));
  if (!r.ok()) return Error{python_failure(python, r)};
  json j = json::parse(r.out, nullptr, false);
  if (j.is_discarded() || !j.is_array() || j.size() != files.size())
    return Error{"Python '" + python + "' gave an unexpected answer to the file peek: " + tail(r.out, 200)};
  std::vector<FileDefinitions> out;
  for (size_t i = 0; i < files.size(); ++i) {
    FileDefinitions d;
    d.path = files[i];
    for (const auto& n : j[i]["names"]) d.names.push_back(n.get<std::string>());
    d.star_import = j[i]["star"].get<bool>();
    d.syntax_error = j[i]["error"].get<std::string>();
    out.push_back(std::move(d));
  }
  return out;
}

std::string problem_input_error(const FileDefinitions& d) {
  if (!d.syntax_error.empty()) return d.path.string() + ": " + d.syntax_error + " (the problem file does not parse)";
  if (d.star_import) return {};
  std::vector<std::string> missing;
  if (!has(d, "Model")) missing.push_back("Model");
  // get_input_configs() alone is enough: it lists every {get_init_inputs, get_inputs} pair.
  if (!has(d, "get_inputs") && !has(d, "get_input_configs")) missing.push_back("get_inputs");
  if (missing.empty()) return {};
  std::string list;
  for (size_t i = 0; i < missing.size(); ++i) list += (i ? " and " : "") + missing[i];
  return d.path.string() + ": no " + list +
         " (a KernelBench problem defines class Model, get_inputs() and get_init_inputs(), or get_input_configs())";
}

std::string kernel_input_error(const FileDefinitions& d) {
  if (!d.syntax_error.empty() || d.star_import || has(d, "ModelNew")) return {};
  std::string hint = has(d, "Model") ? " (it defines Model: is this the problem file?)" : "";
  return d.path.string() + ": no ModelNew (a candidate defines class ModelNew)" + hint;
}

std::string Violation::to_line() const {
  return file + ":" + std::to_string(line) + ": " + rule + ": " + message;
}

Result<StaticCheck> run_static_check(const std::string& python, const fs::path& kernel, bool allow_pytorch,
                                     const fs::path& worker_dir) {
  auto text = read_file(kernel);
  if (!text) return Error{text.error()};
  SubprocessOptions o;
  o.argv = {python, "-c", kCheckScript, kernel.string(), allow_pytorch ? "1" : "0"};
  o.env = scrubbed_environment();
  fs::path wd = worker_dir.empty() ? install_root() / "worker" : worker_dir;
  std::string pp = wd.string();
  if (auto it = o.env->find("PYTHONPATH"); it != o.env->end() && !it->second.empty()) pp += ":" + it->second;
  (*o.env)["PYTHONPATH"] = pp;
  (*o.env)["PYTHONDONTWRITEBYTECODE"] = "1";
  auto r = run_subprocess(o, {}, std::chrono::seconds(120));
  if (!r.ok()) return Error{"the static checker did not run: " + python_failure(python, r)};
  json j = json::parse(r.out, nullptr, false);
  if (j.is_discarded() || !j.is_array())
    return Error{"the static checker gave an unexpected answer: " + tail(r.out, 200)};
  StaticCheck sc;
  for (const auto& v : j) {
    Violation x;
    x.file = v.value("file", std::string());
    x.line = v.value("line", 0);
    x.rule = v.value("rule", std::string());
    x.message = v.value("message", std::string());
    sc.violations.push_back(std::move(x));
  }
  sc.clean = sc.violations.empty();
  return sc;
}

}  // namespace mk::eval
