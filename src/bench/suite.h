// A benchmark suite: the problems named on the command line, identified by file
// name and content hash, and split deterministically into shards.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "util/result.h"

namespace mk::bench {

struct SuiteProblem {
  std::filesystem::path path;
  std::string name;   ///< file stem, e.g. "19_ReLU"
  std::string level;  ///< parent folder when it looks like a KernelBench level ("level2"), else ""
  std::string hash;   ///< sha256 of the file's content
  /// Stable identifier used for run directories and reports: [level-]name-<8 hex of hash>.
  std::string id() const;
};

/// Expands files and directories (recursively, *.py, skipping __init__.py and
/// files without `class Model`) into a list sorted by level then by KernelBench
/// number then name. Duplicate contents are listed once. Errors name the path.
/// skipped (when given) gets "FILE: why" for every .py file of a folder that is
/// not a problem (no class Model, no get_inputs/get_init_inputs): left out, not counted.
Result<std::vector<SuiteProblem>> discover_problems(const std::vector<std::filesystem::path>& args,
                                                   std::vector<std::string>* skipped = nullptr);

struct Shard {
  int index = 0;  ///< 0-based
  int count = 1;
};

/// Parses "I/N" (0 <= I < N). The error explains the expected form.
Result<Shard> parse_shard(const std::string& text);

/// The problems of one shard: position i in the sorted suite goes to shard i mod N.
/// Every problem lands in exactly one shard.
std::vector<SuiteProblem> select_shard(const std::vector<SuiteProblem>& suite, Shard shard);

}  // namespace mk::bench
