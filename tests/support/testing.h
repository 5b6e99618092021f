// Shared helpers for the C++ tests.
#pragma once

#include <filesystem>
#include <string>

namespace mk::testing {

/// The repository root (where examples/, worker/ and tests/ live).
std::filesystem::path repo_root();

/// The Python interpreter with torch used by CPU worker tests
/// ($MKEVOLVE_TEST_PYTHON, default /usr/bin/python3).
std::string test_python();

/// True when test_python() can import torch; tests that need it skip otherwise.
bool test_python_has_torch();

}  // namespace mk::testing
