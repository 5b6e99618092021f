#include "agents/prompts.h"

#include <algorithm>

#include <fmt/format.h>

#include "util/fs.h"
#include "util/hash.h"

namespace mk::agents {

namespace {

constexpr std::string_view kSystemMarker = "=== system ===";
constexpr std::string_view kUserMarker = "=== user ===";

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

Result<std::string> expand_partials(const std::map<std::string, std::string>& files, const std::string& name,
                                    const std::string& text, int depth) {
  if (depth > 4) return Error{fmt::format("prompt {}.md: partials nest too deeply (a cycle?)", name)};
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{>", pos);
    if (open == std::string::npos) break;
    size_t close = text.find("}}", open);
    if (close == std::string::npos) return Error{fmt::format("prompt {}.md: unterminated `{{{{>`", name)};
    std::string part = trim(text.substr(open + 3, close - open - 3));
    auto it = files.find("_" + part);
    if (it == files.end())
      return Error{fmt::format("prompt {}.md includes `{}` but _{}.md does not exist", name, part, part)};
    auto inner = expand_partials(files, "_" + part, it->second, depth + 1);
    if (!inner) return inner;
    out += text.substr(pos, open - pos);
    out += trim(*inner);
    pos = close + 2;
  }
  out += text.substr(pos);
  return out;
}

Result<std::string> expand_conditionals(const std::string& name, const std::string& text, const Vars& vars) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{#if", pos);
    if (open == std::string::npos) break;
    size_t head_end = text.find("}}", open);
    size_t end = text.find("{{/if}}", open);
    if (head_end == std::string::npos || end == std::string::npos)
      return Error{fmt::format("prompt {}.md: `{{{{#if` without `{{{{/if}}}}`", name)};
    std::string var = trim(text.substr(open + 5, head_end - open - 5));
    auto it = vars.find(var);
    if (it == vars.end()) return Error{fmt::format("prompt {}.md: condition on unknown variable `{}`", name, var)};
    out += text.substr(pos, open - pos);
    if (!trim(it->second).empty()) out += text.substr(head_end + 2, end - head_end - 2);
    pos = end + 7;
  }
  out += text.substr(pos);
  return out;
}

Result<std::string> substitute(const std::string& name, const std::string& text, const Vars& vars) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == std::string::npos) break;
    size_t close = text.find("}}", open);
    if (close == std::string::npos) return Error{fmt::format("prompt {}.md: unterminated `{{{{`", name)};
    std::string var = trim(text.substr(open + 2, close - open - 2));
    auto it = vars.find(var);
    if (it == vars.end())
      return Error{fmt::format("prompt {}.md uses `{{{{{}}}}}` but no value was given for it", name, var)};
    out += text.substr(pos, open - pos);
    out += it->second;
    pos = close + 2;
  }
  out += text.substr(pos);
  return out;
}

}  // namespace

const std::map<std::string, std::vector<std::string>>& Prompts::required() {
  static const std::map<std::string, std::vector<std::string>> r = {
      {"decompose", {"problem_source", "previous"}},
      {"decompose_feedback", {"failures"}},
      {"refine_feedback", {"failures"}},
      {"generate", {"problem_source", "hardware", "inputs", "shapes"}},
      {"debug", {"problem_source", "hardware", "kernel", "feedback", "inputs", "shapes"}},
      {"optimize", {"problem_source", "hardware", "kernel", "feedback", "profile", "inputs", "shapes"}},
      {"split", {"problem_source", "top_level", "subproblem_files", "failing"}},
      {"fuse", {"problem_source", "top_level", "subproblem_files", "status_table"}},
      {"postfuse", {"problem_source", "hardware", "solution_files", "speedup"}},
      {"judge", {"problem_source", "kernel"}},
      {"reask", {"error", "format"}},
  };
  return r;
}

Result<Prompts> Prompts::load(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return Error{fmt::format("prompt templates not found: {} is not a directory ({})", dir.string(),
                             install_root_search())};
  Prompts p;
  p.dir_ = dir;
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".md" && e.path().filename() != "README.md") paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  Hasher h;
  for (const auto& path : paths) {
    auto text = read_file(path);
    if (!text) return Error{text.error()};
    h.update(path.filename().string()).update(*text);
    p.files_[path.stem().string()] = std::move(*text);
  }
  p.version_ = h.hex().substr(0, 16);
  for (const auto& [name, vars] : required()) {
    if (!p.files_.count(name)) return Error{fmt::format("prompt template {}/{}.md is missing", dir.string(), name)};
    Vars probe;
    for (const auto& v : vars) probe[v] = "x";
    auto r = p.render(name, probe);
    if (!r) return Error{fmt::format("{}/{}.md: {}", dir.string(), name, r.error())};
  }
  return p;
}

Result<Prompts> Prompts::load_default() {
  // An installed copy keeps them in share/mkevolve/prompts, the source tree in src/prompts.
  std::filesystem::path root = install_root();
  std::error_code ec;
  return load(std::filesystem::is_directory(root / "prompts", ec) ? root / "prompts" : root / "src" / "prompts");
}

Result<RenderedPrompt> Prompts::render(const std::string& name, const Vars& vars) const {
  auto it = files_.find(name);
  if (it == files_.end()) return Error{fmt::format("no prompt template {}.md in {}", name, dir_.string())};
  auto text = expand_partials(files_, name, it->second, 0);
  if (!text) return Error{text.error()};
  auto cond = expand_conditionals(name, *text, vars);
  if (!cond) return Error{cond.error()};
  // Split before substituting, so a marker inside a variable's value is inert.
  std::string sys_part, user_part = *cond;
  size_t s = cond->find(kSystemMarker), u = cond->find(kUserMarker);
  if (s != std::string::npos && u != std::string::npos && s < u) {
    sys_part = cond->substr(s + kSystemMarker.size(), u - s - kSystemMarker.size());
    user_part = cond->substr(u + kUserMarker.size());
  } else if (u != std::string::npos) {
    user_part = cond->substr(u + kUserMarker.size());
  }
  auto sys_r = substitute(name, sys_part, vars);
  if (!sys_r) return Error{sys_r.error()};
  auto user_r = substitute(name, user_part, vars);
  if (!user_r) return Error{user_r.error()};
  return RenderedPrompt{trim(*sys_r), trim(*user_r) + "\n"};
}

}  // namespace mk::agents
