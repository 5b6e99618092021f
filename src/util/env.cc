#include "util/env.h"

#include "util/hash.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <vector>

extern char** environ;

namespace mk {

namespace {

std::string upper(std::string_view s) {
  std::string u(s);
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return std::toupper(c); });
  return u;
}

bool has_prefix(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

bool looks_secret(std::string_view name) {
  std::string u = upper(name);
  static const char* kWords[] = {"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "SESSION", "COOKIE"};
  for (const char* w : kWords)
    if (u.find(w) != std::string::npos) return true;
  return has_prefix(u, "AWS_") || has_prefix(u, "AZURE_") || has_prefix(u, "GOOGLE_APPLICATION");
}

Env current_environment() {
  Env env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

Env scrubbed_environment() {
  static const char* kExact[] = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "LD_LIBRARY_PATH", "HOME", "MKEVOLVE_SANDBOX",
                                 "USER", "LOGNAME", "SHELL", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX",
                                 "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"};
  static const char* kPrefixes[] = {"LC_", "CUDA_", "NVIDIA_", "TRITON_", "TORCH", "PYTORCH_", "NCCL_", "MKEVOLVE_WORKER_"};
  Env out;
  for (const auto& [k, v] : current_environment()) {
    if (looks_secret(k)) continue;
    bool keep = std::any_of(std::begin(kExact), std::end(kExact), [&](const char* x) { return k == x; }) ||
                std::any_of(std::begin(kPrefixes), std::end(kPrefixes), [&](const char* p) { return has_prefix(k, p); });
    if (keep) out.emplace(k, v);
  }
  return out;
}

namespace {
struct SecretSet {
  std::mutex mu;
  std::vector<std::string> values;
  bool loaded = false;
};
SecretSet& secret_set() {
  static SecretSet s;
  return s;
}
}  // namespace

void register_secret(std::string value) {
  if (value.size() < 8) return;
  auto& s = secret_set();
  std::lock_guard lock(s.mu);
  if (std::find(s.values.begin(), s.values.end(), value) == s.values.end()) s.values.push_back(std::move(value));
}

std::string redact_secrets(std::string text) {
  auto& s = secret_set();
  std::vector<std::string> values;
  {
    std::lock_guard lock(s.mu);
    if (!s.loaded) {
      s.loaded = true;
      for (const auto& [k, v] : current_environment())
        if (looks_secret(k) && v.size() >= 8) s.values.push_back(v);
    }
    values = s.values;
  }
  for (const auto& v : values) {
    for (size_t pos = text.find(v); pos != std::string::npos; pos = text.find(v, pos))
      text.replace(pos, v.size(), "[REDACTED]");
  }
  return text;
}

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

namespace {

/// Upper-case names that mention a secret's word but hold a setting.
bool is_setting(std::string_view name) {
  std::string u = upper(name);
  for (const char* w : {"MAX_TOKENS", "TOKEN_BUDGET", "_TOKENS", "TOKENIZER"})
    if (u.find(w) != std::string::npos) return true;
  return false;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n'; }

/// A name that says its value is a credential: an option or config key
/// is_secret_key names (`--api-key`, `--token`, `x-api-key`, not `--max-tokens`),
/// or an environment variable looks_secret names (`OPENAI_API_KEY=`).
bool credential_name(std::string_view name) {
  while (!name.empty() && name.front() == '-') name.remove_prefix(1);
  return is_secret_key(name) || (!name.empty() && upper(name) == name && looks_secret(name) && !is_setting(name));
}

}  // namespace

bool looks_like_key(std::string_view v) {
  static const char* kPrefixes[] = {"sk-", "sk_live_", "sk-ant-", "AKIA", "ASIA", "ghp_", "gho_", "github_pat_",
                                    "xoxb-", "xoxp-", "hf_", "AIza"};
  for (const char* p : kPrefixes) {
    // Short values ("sk-" as a prefix setting) are not keys.
    if (has_prefix(v, p) && v.size() >= std::string_view(p).size() + 12 &&
        v.find(' ', std::string_view(p).size()) == std::string_view::npos)
      return true;
  }
  return false;
}

std::vector<std::pair<size_t, size_t>> credential_spans(std::string_view text) {
  std::vector<std::pair<size_t, size_t>> out;
  // URL userinfo: scheme://USERINFO@host
  for (size_t at = text.find("://"); at != std::string_view::npos; at = text.find("://", at + 3)) {
    size_t start = at + 3, end = start;
    while (end < text.size() && !is_space(text[end]) && text[end] != '/' && text[end] != '@' && text[end] != '"' &&
           text[end] != '\'')
      ++end;
    if (end >= text.size() || text[end] != '@' || end == start) continue;
    size_t colon = text.substr(start, end - start).find(':');
    if (colon == std::string_view::npos) out.emplace_back(start, end);           // a token as the user
    else if (start + colon + 1 < end) out.emplace_back(start + colon + 1, end);  // the password
  }
  // A command line: tokens split on blanks, quotes stripped at their ends.
  struct Tok {
    size_t b, e;
  };
  std::vector<Tok> toks;
  for (size_t i = 0; i < text.size();) {
    while (i < text.size() && is_space(text[i])) ++i;
    size_t b = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > b) {
      size_t tb = b, te = i;
      while (tb < te && (text[tb] == '"' || text[tb] == '\'')) ++tb;
      while (te > tb && (text[te - 1] == '"' || text[te - 1] == '\'')) --te;
      if (te > tb) toks.push_back({tb, te});
    }
  }
  for (size_t k = 0; k < toks.size(); ++k) {
    std::string_view t = text.substr(toks[k].b, toks[k].e - toks[k].b);
    if (size_t eq = t.find('='); eq != std::string_view::npos && eq > 0 && eq + 1 < t.size()) {
      if (credential_name(t.substr(0, eq))) out.emplace_back(toks[k].b + eq + 1, toks[k].e);  // --token=V, KEY=V
      continue;
    }
    if (looks_like_key(t)) {
      out.emplace_back(toks[k].b, toks[k].e);
      continue;
    }
    const bool flag = t.size() > 1 && t[0] == '-';
    const bool scheme = t == "Bearer" || t == "bearer" || t == "Basic" || t == "basic" || t == "Token" || t == "token";
    std::string_view header = t.back() == ':' ? t.substr(0, t.size() - 1) : std::string_view();
    if (k + 1 < toks.size() && ((flag && credential_name(t)) || scheme || (!header.empty() && credential_name(header)))) {
      std::string_view next = text.substr(toks[k + 1].b, toks[k + 1].e - toks[k + 1].b);
      // "Authorization: Bearer V": the scheme's own next token holds it.
      if (!scheme && (next == "Bearer" || next == "bearer" || next == "Basic" || next == "basic")) continue;
      out.emplace_back(toks[k + 1].b, toks[k + 1].e);
      ++k;
    }
  }
  std::sort(out.begin(), out.end());
  // Overlaps (a URL inside an option's value): keep the outer one.
  std::vector<std::pair<size_t, size_t>> merged;
  for (const auto& sp : out) {
    if (!merged.empty() && sp.first < merged.back().second) {
      merged.back().second = std::max(merged.back().second, sp.second);
      continue;
    }
    merged.push_back(sp);
  }
  return merged;
}

std::string redact_credentials(std::string_view text) {
  std::string out;
  size_t at = 0;
  for (const auto& [b, e] : credential_spans(text)) {
    out.append(text.substr(at, b - at));
    out += "[REDACTED sha256:" + sha256_hex(text.substr(b, e - b)).substr(0, 8) + "]";
    at = e;
  }
  out.append(text.substr(at));
  return out;
}

void register_credentials(std::string_view text) {
  for (const auto& [b, e] : credential_spans(text)) register_secret(std::string(text.substr(b, e - b)));
}

}  // namespace mk
