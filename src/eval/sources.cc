#include "eval/sources.h"

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

#include "util/fs.h"
#include "util/hash.h"

namespace mk::eval {

namespace fs = std::filesystem;

Result<fs::path> resolve_kernel_path(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return Error{p.string() + ": no such file or directory"};
  if (fs::is_directory(p, ec)) {
    fs::path inner = p / "decomposed_solution.py";
    if (fs::is_regular_file(inner, ec)) return inner;
    return Error{p.string() + ": a directory without decomposed_solution.py (expected a kernel file or a solution package)"};
  }
  return p;
}

namespace {

void add_py_tree(const fs::path& dir, std::set<fs::path>& out) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    const auto& p = it->path();
    if (it->is_directory(ec) && (p.filename() == "__pycache__" || p.filename().string().starts_with("."))) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec) && p.extension() == ".py") out.insert(p.lexically_normal());
  }
}

// Module names a Python source imports, with leading dots for relative ones.
// A line scan, not a parser: it only has to find sibling files for hashing,
// and over-including a file only makes the cache more conservative.
std::vector<std::string> imported_modules(const std::string& text) {
  static const std::regex from_re(R"(^\s*from\s+(\.*)([A-Za-z_][\w.]*)?\s+import\s+\(?\s*([^#\n]*))");
  static const std::regex import_re(R"(^\s*import\s+([^#\n]+))");
  std::vector<std::string> mods;
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, from_re)) {
      std::string dots = m[1], mod = m[2];
      if (!mod.empty()) mods.push_back(dots + mod);
      {
        // `from . import a, b` / `from pkg import a`: a and b may be modules.
        std::string names = m[3];
        std::istringstream ns(names);
        std::string part;
        while (std::getline(ns, part, ',')) {
          std::smatch w;
          static const std::regex word(R"(^\s*\(?\s*([A-Za-z_]\w*))");
          if (std::regex_search(part, w, word)) mods.push_back(dots + (mod.empty() ? "" : mod + ".") + std::string(w[1]));
        }
      }
    } else if (std::regex_search(line, m, import_re)) {
      std::istringstream ns{std::string(m[1])};
      std::string part;
      while (std::getline(ns, part, ',')) {
        std::smatch w;
        static const std::regex word(R"(^\s*([A-Za-z_][\w.]*))");
        if (std::regex_search(part, w, word)) mods.push_back(w[1]);
      }
    }
  }
  return mods;
}

void follow(const fs::path& file, std::set<fs::path>& out) {
  fs::path norm = file.lexically_normal();
  if (!out.insert(norm).second) return;
  auto text = read_file(norm);
  if (!text) return;
  fs::path dir = norm.parent_path();
  for (std::string mod : imported_modules(*text)) {
    fs::path base = dir;
    size_t dots = 0;
    while (dots < mod.size() && mod[dots] == '.') ++dots;
    for (size_t i = 1; i < dots; ++i) base = base.parent_path();
    mod = mod.substr(dots);
    if (mod.empty()) continue;
    // Walk the dotted path as far as it exists on disk beside the file.
    fs::path cur = base;
    std::istringstream parts(mod);
    std::string part;
    std::error_code ec;
    while (std::getline(parts, part, '.')) {
      fs::path as_file = cur / (part + ".py");
      fs::path as_dir = cur / part;
      if (fs::is_regular_file(as_file, ec)) {
        follow(as_file, out);
        break;
      }
      if (fs::is_directory(as_dir, ec) && fs::exists(as_dir / "__init__.py", ec)) {
        follow(as_dir / "__init__.py", out);
        cur = as_dir;
        continue;
      }
      if (fs::is_directory(as_dir, ec)) {  // namespace package
        cur = as_dir;
        continue;
      }
      break;
    }
  }
}

}  // namespace

std::vector<fs::path> source_files(const fs::path& file) {
  std::set<fs::path> out;
  if (file.filename() == "decomposed_solution.py") {
    out.insert(file.lexically_normal());
    add_py_tree(file.parent_path().empty() ? fs::path(".") : file.parent_path(), out);
  } else {
    follow(file, out);
  }
  return {out.begin(), out.end()};
}

Result<std::string> hash_sources(const fs::path& file) {
  auto files = source_files(file);
  fs::path root = file.lexically_normal().parent_path();
  Hasher h;
  h.update("mkevolve-sources-v1");
  for (const auto& f : files) {
    auto text = read_file(f);
    if (!text) return Error{text.error()};
    h.update(f == file.lexically_normal() ? fs::path("<main>").string() : f.lexically_relative(root).string());
    h.update(*text);
  }
  return h.hex();
}

}  // namespace mk::eval
