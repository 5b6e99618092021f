#include "rundir/secrets.h"

#include <algorithm>
#include <cctype>

#include "util/env.h"

namespace mk::rundir {

namespace {

// "awsSecretAccessKey" / "aws-secret_access.key" -> {"aws","secret","access","key"}.
std::vector<std::string> words(std::string_view key) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(cur), cur.clear();
  };
  for (size_t i = 0; i < key.size(); ++i) {
    unsigned char c = key[i];
    if (!std::isalnum(c)) {
      flush();
      continue;
    }
    if (std::isupper(c) && i > 0 && std::islower(static_cast<unsigned char>(key[i - 1]))) flush();
    cur.push_back(static_cast<char>(std::tolower(c)));
  }
  flush();
  return out;
}

bool has_prefix(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

bool is_secret_key(std::string_view key) {
  std::vector<std::string> w = words(key);
  if (w.empty()) return false;
  static const char* kReferenceWords[] = {"env", "var", "variable", "file", "path", "name", "command", "cmd", "helper"};
  for (const char* r : kReferenceWords)
    if (w.back() == r) return false;
  static const char* kAlways[] = {"secret", "secrets", "password", "passwd", "passphrase", "apikey", "credential",
                                  "credentials", "authorization", "bearer", "cookie", "cookies"};
  for (const auto& x : w)
    for (const char* s : kAlways)
      if (x == s) return true;
  // "key" alone, or a key qualified as api/access/private/secret/session/signing key.
  if (w.size() == 1 && w[0] == "key") return true;
  for (size_t i = 0; i + 1 < w.size(); ++i) {
    if (w[i + 1] != "key" && w[i + 1] != "keys") continue;
    static const char* kQualifiers[] = {"api", "access", "private", "session", "signing", "auth", "x"};
    for (const char* q : kQualifiers)
      if (w[i] == q) return true;
  }
  // A singular "token" at the end: auth_token, session_token, hf_token, token.
  // "max_tokens", "token_budget" and "tokens" are settings, not secrets.
  return w.back() == "token";
}

bool is_secret_value(std::string_view v) {
  static const char* kPrefixes[] = {"sk-", "sk_live_", "sk-ant-", "AKIA", "ASIA", "ghp_", "gho_", "github_pat_",
                                    "xoxb-", "xoxp-", "hf_", "AIza", "Bearer ", "bearer "};
  for (const char* p : kPrefixes) {
    // Short values ("sk-" as a prefix setting) are not keys.
    if (has_prefix(v, p) && v.size() >= std::string_view(p).size() + 12) {
      bool spaceless = v.find(' ', std::string_view(p).size()) == std::string_view::npos;
      if (spaceless) return true;
    }
  }
  std::string s(v);
  return redact_secrets(s) != s;
}

namespace {

nlohmann::json strip(const nlohmann::json& j, const std::string& path, std::vector<std::string>* dropped) {
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = j.begin(); it != j.end(); ++it) {
      std::string child = path.empty() ? it.key() : path + "." + it.key();
      if (is_secret_key(it.key()) || (it->is_string() && is_secret_value(it->get<std::string>()))) {
        if (dropped) dropped->push_back(child);
        continue;
      }
      out[it.key()] = strip(*it, child, dropped);
    }
    return out;
  }
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < j.size(); ++i) {
      std::string child = path + "[" + std::to_string(i) + "]";
      if (j[i].is_string() && is_secret_value(j[i].get<std::string>())) {
        if (dropped) dropped->push_back(child);
        continue;
      }
      out.push_back(strip(j[i], child, dropped));
    }
    return out;
  }
  return j;
}

}  // namespace

nlohmann::json strip_secrets(const nlohmann::json& j, std::vector<std::string>* dropped) {
  return strip(j, "", dropped);
}

}  // namespace mk::rundir
