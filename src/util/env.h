// Environment handling. Secrets (API keys, tokens) must never reach LLM-generated
// code, logs or run directories; everything that starts a child goes through here.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/subprocess.h"

namespace mk {

/// True for variable names that look like they hold a credential
/// (…KEY, …TOKEN, …SECRET…, …PASSWORD…, AWS_*, …CREDENTIAL…, …AUTH…).
bool looks_secret(std::string_view name);

/// The environment for a process that runs untrusted code or tools: only an
/// allow-list of harmless variables (PATH, locale, CUDA/NVIDIA/Triton settings,
/// LD_LIBRARY_PATH, ...) survives, and never one that looks_secret().
Env scrubbed_environment();

/// Our own environment as a map (for children that are trusted, e.g. exec: providers).
Env current_environment();

/// True for a config key or option name that names a credential: api_key,
/// secret, password, auth_token, aws_secret_access_key, authorization, ... but
/// not max_tokens, token_budget or api_key_env (a key whose last word is
/// env/var/file/path names where a secret lives, not the secret).
bool is_secret_key(std::string_view key);

/// Adds a value (e.g. a key read from a config file) to the set redact_secrets() hides.
void register_secret(std::string value);

/// Replaces every occurrence of each secret value in text with "[REDACTED]".
/// Values come from our environment's secret-looking variables (length >= 8)
/// and from register_secret (API keys read, credentials in flags and config files).
std::string redact_secrets(std::string text);

/// True for a value shaped like a provider's key (sk-..., sk-ant-..., AKIA...,
/// ghp_..., hf_..., AIza..., at least 12 characters past the prefix, no blanks).
bool looks_like_key(std::string_view value);

/// Where a credential sits inside a flag's value: [start, end) of each one.
/// Found: a URL's userinfo password (`https://user:PASS@host`, or the whole
/// userinfo when it has no password: a token); in a command line (an exec:
/// spec), the value of an option or assignment whose name says credential
/// (`--api-key V`, `--token=V`, `OPENAI_API_KEY=V`, `-H "Authorization: Bearer V"`)
/// and any token that looks like a key (sk-..., ghp_..., AKIA...).
std::vector<std::pair<size_t, size_t>> credential_spans(std::string_view text);

/// text with each credential_spans value replaced by `[REDACTED sha256:XXXXXXXX]`
/// (the first 8 hex digits of its SHA-256): a run records which credential it
/// used, never its value, and a resume can tell the same credential given again.
std::string redact_credentials(std::string_view text);

/// register_secret for every credential in text (a flag's value), so that
/// redact_secrets hides them wherever they would otherwise travel.
void register_credentials(std::string_view text);

}  // namespace mk
