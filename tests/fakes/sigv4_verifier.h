// An AWS SigV4 verifier for the fake Bedrock server, written apart from
// src/llm/sigv4.cc (own encoding, parsing and hashing code) and following the
// canonicalisation of AWS's documented signing process and its test suite:
// the canonical URI encodes each segment of the path as received once more
// (so "v1%3A0" becomes "v1%253A0"), the query is sorted by encoded name, the
// signed headers are lower-cased, trimmed and space-collapsed.
#pragma once

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "fakes/http_server.h"

namespace mk::fakes {

struct AwsTestCredentials {
  std::string access_key_id = "AKIDEXAMPLE";
  std::string secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
  std::string region = "us-east-1";
  std::string service = "bedrock";
};

namespace sigv4v {

inline std::string to_hex(const unsigned char* p, size_t n) {
  std::string out;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", p[i]);
    out += b;
  }
  return out;
}

inline std::string sha256(const std::string& s) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(s.data(), s.size(), md, &n, EVP_sha256(), nullptr);
  return to_hex(md, n);
}

inline std::string mac(const std::string& key, const std::string& msg) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(msg.data()),
       msg.size(), md, &n);
  return std::string(reinterpret_cast<char*>(md), n);
}

/// RFC 3986 encoding: unreserved characters stay, everything else is %XX (upper case).
inline std::string encode(const std::string& s) {
  static const std::string unreserved =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~";
  std::ostringstream os;
  for (unsigned char c : s) {
    if (unreserved.find(static_cast<char>(c)) != std::string::npos) {
      os << static_cast<char>(c);
    } else {
      char b[4];
      std::snprintf(b, sizeof b, "%%%02X", c);
      os << b;
    }
  }
  return os.str();
}

inline std::string decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::strtol(s.substr(i + 1, 2).c_str(), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

inline std::string strip(const std::string& s) {
  size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace sigv4v

/// Empty when the request carries a valid signature for creds; otherwise why not.
/// Also fills *canonical_out (when given) with the canonical request it built.
inline std::string verify_sigv4(const ReceivedRequest& req, const AwsTestCredentials& creds,
                                std::string* canonical_out = nullptr) {
  using namespace sigv4v;
  const std::string auth = req.header("authorization");
  const std::string prefix = "AWS4-HMAC-SHA256 ";
  if (auth.rfind(prefix, 0) != 0) return "no AWS4-HMAC-SHA256 Authorization header";
  std::string credential, signed_headers, signature;
  for (const auto& part : split(auth.substr(prefix.size()), ',')) {
    std::string p = strip(part);
    auto eq = p.find('=');
    if (eq == std::string::npos) continue;
    std::string k = p.substr(0, eq), v = p.substr(eq + 1);
    if (k == "Credential") credential = v;
    if (k == "SignedHeaders") signed_headers = v;
    if (k == "Signature") signature = v;
  }
  auto scope = split(credential, '/');
  if (scope.size() != 5) return "malformed Credential '" + credential + "'";
  if (scope[0] != creds.access_key_id) return "unknown access key id '" + scope[0] + "'";
  const std::string amz_date = req.header("x-amz-date");
  if (amz_date.size() != 16) return "missing or malformed X-Amz-Date";
  if (scope[1] != amz_date.substr(0, 8)) return "credential date does not match X-Amz-Date";
  if (scope[2] != creds.region) return "wrong region in scope: " + scope[2];
  if (scope[3] != creds.service) return "wrong service in scope: " + scope[3];
  if (scope[4] != "aws4_request") return "scope does not end in aws4_request";
  auto names = split(signed_headers, ';');
  if (std::find(names.begin(), names.end(), "host") == names.end()) return "host is not signed";
  if (std::find(names.begin(), names.end(), "x-amz-date") == names.end()) return "x-amz-date is not signed";
  if (!std::is_sorted(names.begin(), names.end())) return "SignedHeaders are not sorted";

  // Canonical URI: each segment of the received path, encoded once more.
  std::string uri;
  auto segments = split(req.path.empty() ? "/" : req.path, '/');
  for (size_t i = 0; i < segments.size(); ++i) {
    if (i) uri += "/";
    uri += encode(segments[i]);
  }
  // Canonical query: decoded then re-encoded pairs, sorted.
  std::vector<std::pair<std::string, std::string>> params;
  if (!req.query.empty())
    for (const auto& kv : split(req.query, '&')) {
      if (kv.empty()) continue;
      auto eq = kv.find('=');
      params.emplace_back(encode(decode(kv.substr(0, eq))), eq == std::string::npos ? "" : encode(decode(kv.substr(eq + 1))));
    }
  std::sort(params.begin(), params.end());
  std::string query;
  for (const auto& [k, v] : params) query += (query.empty() ? "" : "&") + k + "=" + v;
  // Canonical headers, in SignedHeaders order.
  std::string headers;
  for (const auto& n : names) {
    if (!req.headers.count(n)) return "signed header '" + n + "' is missing from the request";
    std::string v = strip(req.headers.at(n)), collapsed;
    for (char c : v)
      if (!(c == ' ' && !collapsed.empty() && collapsed.back() == ' ')) collapsed += c;
    headers += n + ":" + collapsed + "\n";
  }
  std::string payload = req.header("x-amz-content-sha256");
  if (payload.empty()) payload = sha256(req.body);
  std::string canonical =
      req.method + "\n" + uri + "\n" + query + "\n" + headers + "\n" + signed_headers + "\n" + payload;
  if (canonical_out) *canonical_out = canonical;
  std::string to_sign = "AWS4-HMAC-SHA256\n" + amz_date + "\n" + scope[1] + "/" + scope[2] + "/" + scope[3] +
                        "/aws4_request\n" + sha256(canonical);
  std::string key = mac(mac(mac(mac("AWS4" + creds.secret, scope[1]), scope[2]), scope[3]), "aws4_request");
  std::string expect = mac(key, to_sign);
  std::string expect_hex = to_hex(reinterpret_cast<const unsigned char*>(expect.data()), expect.size());
  if (expect_hex != signature) return "signature mismatch: expected " + expect_hex + ", got " + signature;
  return "";
}

}  // namespace mk::fakes
