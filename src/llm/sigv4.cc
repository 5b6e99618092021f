#include "llm/sigv4.h"

#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>
#include <sstream>

#include "llm/http.h"
#include "util/env.h"
#include "util/fs.h"
#include "util/hash.h"

namespace mk::llm {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

/// Trims and collapses runs of spaces, as the canonical header form requires.
std::string canonical_value(std::string_view v) {
  std::string t = trim(v), out;
  for (char c : t)
    if (!(c == ' ' && !out.empty() && out.back() == ' ')) out += c;
  return out;
}

std::string hex(std::string_view raw) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string canonical_uri(const std::string& path, bool double_encode) {
  if (path.empty()) return "/";
  if (!double_encode) return path;
  std::string out;
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    std::string_view seg(path.data() + start, (slash == std::string::npos ? path.size() : slash) - start);
    out += uri_encode(seg);
    if (slash == std::string::npos) break;
    out += '/';
    start = slash + 1;
  }
  return out;
}

std::string canonical_query(const std::string& query) {
  if (query.empty()) return "";
  std::vector<std::pair<std::string, std::string>> params;
  size_t start = 0;
  while (start <= query.size()) {
    size_t amp = query.find('&', start);
    std::string part = query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    if (!part.empty()) {
      size_t eq = part.find('=');
      std::string k = eq == std::string::npos ? part : part.substr(0, eq);
      std::string v = eq == std::string::npos ? "" : part.substr(eq + 1);
      params.emplace_back(uri_encode(percent_decode(k)), uri_encode(percent_decode(v)));
    }
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [k, v] : params) {
    if (!out.empty()) out += '&';
    out += k + "=" + v;
  }
  return out;
}

}  // namespace

std::string hmac_sha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string amz_date_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

SigV4Result sigv4_sign(const SigV4Request& req, const AwsCredentials& creds) {
  SigV4Result r;
  std::map<std::string, std::string> signed_headers;  // sorted by lower-case name
  signed_headers["host"] = canonical_value(req.host);
  signed_headers["x-amz-date"] = req.amz_date;
  if (!creds.session_token.empty()) signed_headers["x-amz-security-token"] = creds.session_token;
  for (const auto& [k, v] : req.headers) signed_headers[lower(k)] = canonical_value(v);

  std::string names, canon_headers;
  for (const auto& [k, v] : signed_headers) {
    canon_headers += k + ":" + v + "\n";
    if (!names.empty()) names += ';';
    names += k;
  }
  const std::string payload_hash = sha256_hex(req.payload);
  r.canonical_request = req.method + "\n" + canonical_uri(req.path, req.double_encode_path) + "\n" +
                        canonical_query(req.query) + "\n" + canon_headers + "\n" + names + "\n" + payload_hash;
  const std::string date = req.amz_date.substr(0, 8);
  const std::string scope = date + "/" + req.region + "/" + req.service + "/aws4_request";
  r.string_to_sign = "AWS4-HMAC-SHA256\n" + req.amz_date + "\n" + scope + "\n" + sha256_hex(r.canonical_request);
  std::string k = hmac_sha256("AWS4" + creds.secret_access_key, date);
  k = hmac_sha256(k, req.region);
  k = hmac_sha256(k, req.service);
  k = hmac_sha256(k, "aws4_request");
  r.signature = hex(hmac_sha256(k, r.string_to_sign));
  r.headers.emplace_back("Authorization", "AWS4-HMAC-SHA256 Credential=" + creds.access_key_id + "/" + scope +
                                              ", SignedHeaders=" + names + ", Signature=" + r.signature);
  r.headers.emplace_back("X-Amz-Date", req.amz_date);
  if (!creds.session_token.empty()) r.headers.emplace_back("X-Amz-Security-Token", creds.session_token);
  return r;
}

namespace {

/// Minimal INI reader: section name -> key -> value.
std::map<std::string, std::map<std::string, std::string>> read_ini(const std::string& text) {
  std::map<std::string, std::map<std::string, std::string>> out;
  std::string section;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::string t = trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[' && t.back() == ']') {
      section = trim(t.substr(1, t.size() - 2));
      continue;
    }
    auto eq = t.find('=');
    if (eq == std::string::npos) continue;
    out[section][lower(trim(t.substr(0, eq)))] = trim(t.substr(eq + 1));
  }
  return out;
}

std::string env_get(const Env& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

std::string pick_profile(const Env& env, const std::string& profile) {
  if (!profile.empty()) return profile;
  std::string p = env_get(env, "AWS_PROFILE");
  return p.empty() ? "default" : p;
}

}  // namespace

Result<AwsCredentials> load_aws_credentials(const Env& env, const std::filesystem::path& home,
                                            const std::string& profile) {
  AwsCredentials c;
  c.access_key_id = env_get(env, "AWS_ACCESS_KEY_ID");
  c.secret_access_key = env_get(env, "AWS_SECRET_ACCESS_KEY");
  if (!c.access_key_id.empty() && !c.secret_access_key.empty()) {
    c.session_token = env_get(env, "AWS_SESSION_TOKEN");
    c.source = "environment";
  } else {
    std::string prof = pick_profile(env, profile);
    std::filesystem::path file = env_get(env, "AWS_SHARED_CREDENTIALS_FILE");
    if (file.empty()) file = home / ".aws" / "credentials";
    auto text = read_file(file);
    if (!text.ok())
      return Error{"bedrock: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or add profile [" +
                   prof + "] to " + file.string() + " (not readable: " + text.error() + ")"};
    auto ini = read_ini(*text);
    auto it = ini.find(prof);
    if (it == ini.end())
      return Error{"bedrock: profile [" + prof + "] not found in " + file.string() +
                   ": set AWS_PROFILE or llm.bedrock.profile, or add the profile"};
    c.access_key_id = it->second["aws_access_key_id"];
    c.secret_access_key = it->second["aws_secret_access_key"];
    c.session_token = it->second["aws_session_token"];
    if (c.access_key_id.empty() || c.secret_access_key.empty())
      return Error{"bedrock: profile [" + prof + "] in " + file.string() +
                   " lacks aws_access_key_id or aws_secret_access_key"};
    c.source = file.string() + " [" + prof + "]";
  }
  register_secret(c.secret_access_key);
  register_secret(c.session_token);
  return c;
}

std::string resolve_aws_region(const Env& env, const std::filesystem::path& home, const std::string& profile,
                               const std::string& fallback) {
  for (const char* k : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    std::string v = env_get(env, k);
    if (!v.empty()) return v;
  }
  if (!fallback.empty()) return fallback;
  std::filesystem::path file = env_get(env, "AWS_CONFIG_FILE");
  if (file.empty()) file = home / ".aws" / "config";
  auto text = read_file(file);
  if (!text.ok()) return "";
  std::string prof = pick_profile(env, profile);
  auto ini = read_ini(*text);
  for (const std::string& section : {prof == "default" ? std::string("default") : "profile " + prof, prof}) {
    auto it = ini.find(section);
    if (it != ini.end() && !it->second["region"].empty()) return it->second["region"];
  }
  return "";
}

}  // namespace mk::llm
