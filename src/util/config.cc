#include "util/config.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <sstream>

#include <toml++/toml.h>

#include "util/env.h"
#include "util/fs.h"
#include "util/strings.h"

namespace mk {

struct Config::Impl {
  toml::table root;
};

namespace {

const char* type_name(toml::node_type t) {
  switch (t) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

}  // namespace

Config::Config() = default;
Config::~Config() = default;
Config::Config(const Config&) = default;
Config& Config::operator=(const Config&) = default;
Config::Config(Config&&) noexcept = default;
Config& Config::operator=(Config&&) noexcept = default;

std::vector<std::string> Config::split_key(std::string_view key) {
  std::vector<std::string> parts;
  std::string cur;
  bool quoted = false;
  for (char c : key) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == '.' && !quoted) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

namespace {
/// Every credential a config file holds (an api_key, a password in a URL's
/// userinfo), registered as a secret as soon as the file is read: text a
/// candidate makes come back (after reading the file) is scrubbed of them
/// wherever it goes, whether or not this run uses that key.
void register_secrets_in(const toml::node& node, std::string_view key) {
  if (const auto* t = node.as_table()) {
    for (auto&& [k, v] : *t) register_secrets_in(v, k.str());
  } else if (const auto* a = node.as_array()) {
    for (auto&& v : *a) register_secrets_in(v, key);
  } else if (const auto* str = node.as_string()) {
    if (is_secret_key(key)) register_secret(str->get());
    register_credentials(str->get());
  }
}
}  // namespace

Result<Config> Config::parse(std::string_view text, std::string source) {
  Config c;
  c.source_ = source;
  auto impl = std::make_shared<Impl>();
  try {
    impl->root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << source << ":" << e.source().begin.line << ": invalid TOML: " << e.description();
    return Error{os.str()};
  }
  register_secrets_in(impl->root, "");
  c.impl_ = std::move(impl);
  return c;
}

Result<Config> Config::load_file(const std::filesystem::path& path) {
  auto text = read_file(path);
  if (!text.ok()) return Error{"config file " + text.error()};
  auto c = parse(*text, path.string());
  if (!c.ok()) return c;
  c->path_ = path;
  return c;
}

Result<Config> Config::discover(const std::filesystem::path& explicit_path, const std::filesystem::path& cwd,
                                const std::filesystem::path& home) {
  namespace fs = std::filesystem;
  if (!explicit_path.empty()) {
    std::error_code ec;
    if (!fs::exists(explicit_path, ec))
      return Error{"config file " + explicit_path.string() + " (from --config) does not exist"};
    return load_file(explicit_path);
  }
  fs::path here = (cwd.empty() ? fs::current_path() : cwd) / "mkevolve.toml";
  std::error_code ec;
  if (fs::exists(here, ec)) return load_file(here);
  fs::path h = home;
  if (h.empty()) {
    const char* e = std::getenv("HOME");
    if (e && *e) h = e;
  }
  if (!h.empty()) {
    fs::path user = h / ".config" / "mkevolve" / "config.toml";
    if (fs::exists(user, ec)) return load_file(user);
  }
  return Config();
}

bool Config::empty() const { return !impl_ || impl_->root.empty(); }

namespace {

const toml::node* lookup(const toml::table* root, std::string_view key) {
  if (!root) return nullptr;
  const toml::node* node = root;
  for (const auto& part : Config::split_key(key)) {
    const auto* t = node->as_table();
    if (!t) return nullptr;
    node = t->get(part);
    if (!node) return nullptr;
  }
  return node;
}

}  // namespace

bool Config::has(std::string_view key) const { return impl_ && lookup(&impl_->root, key) != nullptr; }

std::string Config::where(std::string_view key) const {
  if (source_.empty()) return "";
  const toml::node* n = impl_ ? lookup(&impl_->root, key) : nullptr;
  if (n && n->source().begin.line > 0) return source_ + ":" + std::to_string(n->source().begin.line);
  return source_;
}

Error Config::error_at(std::string_view key, std::string_view message) const {
  std::string w = where(key);
  std::string m = w.empty() ? "config" : w;
  m += ": ";
  m += key;
  m += ": ";
  m += message;
  return Error{m};
}

namespace {
template <class T>
Result<std::optional<T>> absent() {
  return std::optional<T>();
}
}  // namespace

Result<std::optional<std::string>> Config::find_string(std::string_view key) const {
  const toml::node* n = impl_ ? lookup(&impl_->root, key) : nullptr;
  if (!n) return absent<std::string>();
  if (auto v = n->value<std::string>(); v && n->is_string()) return std::optional<std::string>(*v);
  return error_at(key, std::string("expected a string, found ") + type_name(n->type()));
}

Result<std::optional<int64_t>> Config::find_int(std::string_view key) const {
  const toml::node* n = impl_ ? lookup(&impl_->root, key) : nullptr;
  if (!n) return absent<int64_t>();
  if (n->is_integer()) return std::optional<int64_t>(*n->value<int64_t>());
  return error_at(key, std::string("expected an integer, found ") + type_name(n->type()));
}

Result<std::optional<double>> Config::find_number(std::string_view key) const {
  const toml::node* n = impl_ ? lookup(&impl_->root, key) : nullptr;
  if (!n) return absent<double>();
  if (n->is_integer()) return std::optional<double>(static_cast<double>(*n->value<int64_t>()));
  if (n->is_floating_point()) return std::optional<double>(*n->value<double>());
  return error_at(key, std::string("expected a number, found ") + type_name(n->type()));
}

Result<std::optional<bool>> Config::find_bool(std::string_view key) const {
  const toml::node* n = impl_ ? lookup(&impl_->root, key) : nullptr;
  if (!n) return absent<bool>();
  if (n->is_boolean()) return std::optional<bool>(*n->value<bool>());
  return error_at(key, std::string("expected true or false, found ") + type_name(n->type()));
}

Result<std::optional<std::vector<std::string>>> Config::find_strings(std::string_view key) const {
  const toml::node* n = impl_ ? lookup(&impl_->root, key) : nullptr;
  if (!n) return absent<std::vector<std::string>>();
  const auto* arr = n->as_array();
  if (!arr) return error_at(key, std::string("expected an array of strings, found ") + type_name(n->type()));
  std::vector<std::string> out;
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::node& e = *arr->get(i);
    if (!e.is_string())
      return error_at(key, "element " + std::to_string(i) + ": expected a string, found " + type_name(e.type()));
    out.push_back(*e.value<std::string>());
  }
  return std::optional<std::vector<std::string>>(std::move(out));
}

Result<std::string> Config::get_string(std::string_view key, std::string def) const {
  auto r = find_string(key);
  if (!r.ok()) return Error{r.error()};
  return r->value_or(std::move(def));
}

Result<int64_t> Config::get_int(std::string_view key, int64_t def) const {
  auto r = find_int(key);
  if (!r.ok()) return Error{r.error()};
  return r->value_or(def);
}

Result<double> Config::get_number(std::string_view key, double def) const {
  auto r = find_number(key);
  if (!r.ok()) return Error{r.error()};
  return r->value_or(def);
}

Result<bool> Config::get_bool(std::string_view key, bool def) const {
  auto r = find_bool(key);
  if (!r.ok()) return Error{r.error()};
  return r->value_or(def);
}

Result<std::vector<std::string>> Config::table_keys(std::string_view key) const {
  const toml::node* n = impl_ ? lookup(&impl_->root, key) : nullptr;
  if (!n) return std::vector<std::string>();
  const auto* t = n->as_table();
  if (!t) return error_at(key, std::string("expected a table, found ") + type_name(n->type()));
  std::vector<std::string> out;
  for (const auto& [k, v] : *t) out.emplace_back(k.str());
  return out;
}

namespace {

std::string join_key(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += '.';
    bool plain = !p.empty() && std::all_of(p.begin(), p.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
    out += plain ? p : "\"" + p + "\"";
  }
  return out;
}

}  // namespace

std::vector<std::string> Config::unknown_keys(const std::vector<std::string>& patterns) const {
  std::vector<std::vector<std::string>> pats;
  for (const auto& p : patterns) pats.push_back(split_key(p));
  std::vector<std::pair<uint32_t, std::string>> found;  // (line, warning): reported in file order
  std::vector<std::string> out;
  if (!impl_) return out;
  // Patterns that match `path` so far (each part equal, or "*").
  auto matching = [&](const std::vector<std::string>& path) {
    std::vector<const std::vector<std::string>*> m;
    for (const auto& p : pats) {
      if (p.size() < path.size()) continue;
      bool ok = true;
      for (size_t i = 0; i < path.size() && ok; ++i) ok = p[i] == "*" || p[i] == path[i];
      if (ok) m.push_back(&p);
    }
    return m;
  };
  std::function<void(const toml::table&, std::vector<std::string>&)> walk = [&](const toml::table& t,
                                                                               std::vector<std::string>& path) {
    for (const auto& [k, v] : t) {
      path.emplace_back(k.str());
      auto m = matching(path);
      bool leaf_ok = std::any_of(m.begin(), m.end(), [&](auto* p) { return p->size() == path.size(); });
      bool prefix_ok = std::any_of(m.begin(), m.end(), [&](auto* p) { return p->size() > path.size(); });
      if (v.is_table() && prefix_ok) {
        walk(*v.as_table(), path);
      } else if (!leaf_ok) {
        std::string line = source_;
        if (v.source().begin.line > 0) line += ":" + std::to_string(v.source().begin.line);
        std::string msg = line + ": unknown key '" + join_key(path) + "' (ignored)";
        // A near miss among the names allowed at this level.
        std::vector<std::string> parent(path.begin(), path.end() - 1);
        std::string best;
        size_t best_d = 3;
        for (const auto* p : matching(parent)) {
          const std::string& cand = (*p)[parent.size()];
          if (cand == "*") continue;
          size_t d = mk::edit_distance(path.back(), cand);
          if (d < best_d) best_d = d, best = cand;
        }
        if (!best.empty()) {
          parent.push_back(best);
          msg += "; did you mean '" + join_key(parent) + "'?";
        }
        found.emplace_back(v.source().begin.line, msg);
      }
      path.pop_back();
    }
  };
  std::vector<std::string> path;
  walk(impl_->root, path);
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [line, msg] : found) out.push_back(std::move(msg));
  return out;
}

}  // namespace mk
