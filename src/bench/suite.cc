#include "bench/suite.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "problem/problem.h"
#include "util/fs.h"
#include "util/hash.h"

namespace mk::bench {

namespace {

// Leading integer of a KernelBench name ("19_ReLU" -> 19); -1 when absent.
long leading_number(const std::string& name) {
  long n = 0;
  auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
  if (ec != std::errc() || p == name.data()) return -1;
  return n;
}

bool looks_like_level(const std::string& dir) {
  return dir.rfind("level", 0) == 0 && dir.size() > 5 &&
         std::all_of(dir.begin() + 5, dir.end(), [](unsigned char c) { return std::isdigit(c); });
}

Result<SuiteProblem> load_one(const std::filesystem::path& p) {
  auto src = read_file(p);
  if (!src.ok()) return Error{src.error()};
  SuiteProblem sp;
  sp.path = std::filesystem::absolute(p).lexically_normal();
  sp.name = p.stem().string();
  std::string parent = sp.path.parent_path().filename().string();
  if (looks_like_level(parent)) sp.level = parent;
  sp.hash = sha256_hex(*src);
  return sp;
}

bool has_model_class(const std::filesystem::path& p) {
  auto src = read_file(p);
  return src.ok() && src->find("class Model") != std::string::npos;
}

}  // namespace

std::string SuiteProblem::id() const {
  return (level.empty() ? "" : level + "-") + name + "-" + hash.substr(0, 8);
}

Result<std::vector<SuiteProblem>> discover_problems(const std::vector<std::filesystem::path>& args,
                                                   std::vector<std::string>* skipped) {
  std::vector<SuiteProblem> out;
  std::set<std::string> seen;
  auto add = [&](const std::filesystem::path& p) -> Status {
    auto sp = load_one(p);
    if (!sp.ok()) return Error{sp.error()};
    if (seen.insert(sp->hash).second) out.push_back(std::move(*sp));
    return Status::Ok();
  };
  if (args.empty()) return Error{"no problems given: pass problem files, directories, or a KernelBench levelN folder"};
  for (const auto& a : args) {
    std::error_code ec;
    if (std::filesystem::is_directory(a, ec)) {
      std::vector<std::filesystem::path> files;
      for (auto it = std::filesystem::recursive_directory_iterator(a, ec); !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        const auto& p = it->path();
        if (!it->is_regular_file() || p.extension() != ".py" || p.filename() == "__init__.py") continue;
        // A file of a folder that is not a problem is left out, and said so:
        // it is not counted, and it costs nothing.
        auto pr = problem::Problem::load(p);
        if (pr.ok()) {
          files.push_back(p);
        } else if (skipped) {
          std::string why = pr.error();
          if (why.rfind(p.string() + ": ", 0) == 0) why = why.substr(p.string().size() + 2);
          skipped->push_back(p.string() + ": " + why);
        }
      }
      if (ec) return Error{"cannot list " + a.string() + ": " + ec.message()};
      if (files.empty()) return Error{a.string() + ": no problem files (*.py defining class Model, get_inputs and "
                                                   "get_init_inputs) in this directory"};
      for (const auto& f : files)
        if (Status st = add(f); !st.ok()) return Error{st.error()};
    } else if (std::filesystem::exists(a, ec)) {
      if (a.extension() != ".py") return Error{a.string() + ": not a Python problem file (expected *.py)"};
      if (!has_model_class(a)) return Error{a.string() + ": no `class Model` in this file; a problem needs Model, get_inputs and get_init_inputs"};
      if (Status st = add(a); !st.ok()) return Error{st.error()};
    } else {
      return Error{a.string() + ": no such file or directory"};
    }
  }
  std::sort(out.begin(), out.end(), [](const SuiteProblem& x, const SuiteProblem& y) {
    if (x.level != y.level) return x.level < y.level;
    long nx = leading_number(x.name), ny = leading_number(y.name);
    if (nx != ny) return nx < ny;
    if (x.name != y.name) return x.name < y.name;
    return x.hash < y.hash;
  });
  return out;
}

Result<Shard> parse_shard(const std::string& text) {
  auto slash = text.find('/');
  Shard s;
  auto bad = Error{"--shard '" + text + "': expected I/N with 0 <= I < N, e.g. 0/4"};
  if (slash == std::string::npos) return bad;
  auto parse = [](std::string_view v, int* out) {
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
    return ec == std::errc() && p == v.data() + v.size();
  };
  std::string_view t(text);
  if (!parse(t.substr(0, slash), &s.index) || !parse(t.substr(slash + 1), &s.count)) return bad;
  if (s.count < 1 || s.index < 0 || s.index >= s.count) return bad;
  return s;
}

std::vector<SuiteProblem> select_shard(const std::vector<SuiteProblem>& suite, Shard shard) {
  std::vector<SuiteProblem> out;
  for (size_t i = 0; i < suite.size(); ++i)
    if (static_cast<int>(i % shard.count) == shard.index) out.push_back(suite[i]);
  return out;
}

}  // namespace mk::bench
