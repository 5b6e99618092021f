// Which files make up a problem or a candidate, and their content hash (the
// identity the result cache keys on).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "util/result.h"

namespace mk::eval {

/// A candidate given as a solution package directory resolves to the
/// decomposed_solution.py inside it; a file resolves to itself. The error names
/// the path and what is missing.
Result<std::filesystem::path> resolve_kernel_path(const std::filesystem::path& p);

/// The files whose content decides what `file` does when imported: the file,
/// plus the sibling modules and packages it imports (followed transitively,
/// `import x`, `from x import y`, `from . import x`, `from .x import y`). For a
/// decomposed_solution.py, every .py file under its package directory. Sorted,
/// without duplicates.
std::vector<std::filesystem::path> source_files(const std::filesystem::path& file);

/// SHA-256 over source_files(file): relative names and contents. Errors name an
/// unreadable file.
Result<std::string> hash_sources(const std::filesystem::path& file);

}  // namespace mk::eval
