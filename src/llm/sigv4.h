// AWS Signature Version 4, by hand (OpenSSL HMAC-SHA256). libcurl's built-in
// aws-sigv4 signs Bedrock paths wrongly when the model id holds ':' (see
// docs/LLM.md): AWS canonicalises the already-encoded path by encoding each
// segment once more, as botocore does, so "v1%3A0" is signed as "v1%253A0".
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "util/result.h"
#include "util/subprocess.h"

namespace mk::llm {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  ///< empty unless temporary credentials
  std::string source;         ///< "environment" or "~/.aws/credentials [profile]" (for messages)
};

struct SigV4Request {
  std::string method;     ///< "POST"
  std::string host;       ///< as in the Host header, with ":port" when not default
  std::string path;       ///< exactly as sent on the wire (already percent-encoded once)
  std::string query;      ///< as sent, without '?'; may be empty
  /// Headers to sign besides host/x-amz-date/x-amz-security-token (e.g. content-type).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string payload;
  std::string region;
  std::string service;    ///< "bedrock" for the Bedrock runtime
  std::string amz_date;   ///< "20150830T123600Z"
  /// true (all services but S3): encode each path segment again for the canonical URI.
  bool double_encode_path = true;
};

struct SigV4Result {
  /// Headers to add to the request: Authorization, X-Amz-Date, X-Amz-Content-Sha256,
  /// and X-Amz-Security-Token with temporary credentials.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;  ///< lower-case hex
};

SigV4Result sigv4_sign(const SigV4Request& req, const AwsCredentials& creds);

/// "YYYYMMDDTHHMMSSZ" for now (UTC).
std::string amz_date_now();

/// HMAC-SHA256 of data with key, raw bytes.
std::string hmac_sha256(std::string_view key, std::string_view data);

/// Credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY(/AWS_SESSION_TOKEN) from env,
/// else the profile (profile arg, else AWS_PROFILE, else "default") in
/// AWS_SHARED_CREDENTIALS_FILE or home/.aws/credentials. Registers the secrets
/// with mk::register_secret. The error says where it looked.
Result<AwsCredentials> load_aws_credentials(const Env& env, const std::filesystem::path& home,
                                            const std::string& profile);

/// Region: AWS_REGION, AWS_DEFAULT_REGION, the given fallback (config), then the
/// profile's region in home/.aws/config. Empty when none.
std::string resolve_aws_region(const Env& env, const std::filesystem::path& home, const std::string& profile,
                               const std::string& fallback);

}  // namespace mk::llm
