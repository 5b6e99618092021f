// Environment handling. Secrets (API keys, tokens) must never reach LLM-generated
// code, logs or run directories; everything that starts a child goes through here.
#pragma once

#include <string>
#include <string_view>

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

/// Adds a value (e.g. a key read from a config file) to the set redact_secrets() hides.
void register_secret(std::string value);

/// Replaces every occurrence of each secret value in text with "[REDACTED]".
/// Values come from our environment's secret-looking variables (length >= 8).
std::string redact_secrets(std::string text);

}  // namespace mk
