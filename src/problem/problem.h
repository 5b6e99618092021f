// The things MKEvolve works on: a KernelBench problem, its decomposition into
// subproblems under a top-level module (a Topology), and the kernels written
// for them. Pure data plus file I/O; no LLM, no evaluator.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace mk::problem {

namespace fs = std::filesystem;

/// A KernelBench-format file: `Model`, `get_inputs()`, `get_init_inputs()`.
struct Problem {
  fs::path path;
  std::string source;
  std::string hash;   ///< sha256 of source
  std::string name;   ///< file stem, e.g. "19_ConvTranspose2d_GELU_GroupNorm"

  static Result<Problem> load(const fs::path& path);
  static Problem from_source(std::string name, std::string source, fs::path path = {});
};

/// One subproblem: a PyTorch reference module in subkernel_problems/<name>.py.
struct Subproblem {
  std::string name;     ///< Python identifier; the file is subkernel_problems/<name>.py
  std::string source;
  std::string hash;     ///< sha256 of source: kernels survive a topology change only if it is unchanged
  /// Instantiated more than once (the file defines get_input_configs()).
  bool multi_config = false;
  /// The layouts the top level passes its inputs in, as its decomposition
  /// check saw them (eval::EvalOptions::input_layouts' form), when some input
  /// is a non-contiguous view; null: contiguous, as get_inputs() makes them.
  nlohmann::json input_layouts;

  static Subproblem make(std::string name, std::string source);
  std::string file() const { return "subkernel_problems/" + name + ".py"; }
};

/// A decomposition: the top-level module (decomposed_problem.py, class ModelNew,
/// importing each subproblem as `from subkernel_problems.<name> import Model as <Alias>`)
/// and the subproblems it imports, in import order.
struct Topology {
  std::string top_level;
  std::vector<Subproblem> subproblems;
  /// The original module wrapped as the only subproblem (decomposition fallback, TotalFuse).
  bool monolithic = false;
  std::string origin;   ///< decompose, fallback, split, fuse, total_fuse

  const Subproblem* find(const std::string& name) const;
  std::vector<std::string> names() const;

  /// Writes decomposed_problem.py and subkernel_problems/<name>.py (plus an
  /// empty __init__.py) under dir, replacing what a previous write left there.
  /// Scratch copies for verification need no fsync: durable = false.
  Status write_to(const fs::path& dir, bool durable = true) const;

  nlohmann::json to_json() const;
  static Result<Topology> from_json(const nlohmann::json& j);

  /// The fallback: the original problem as the sole subproblem `name`.
  static Topology wrap_original(const Problem& p, const std::string& name = "whole_model");
};

/// One subproblem import found in a top-level file.
struct TopImport {
  std::string module;  ///< subproblem name
  std::string alias;   ///< name bound in the top level ("Model" if no alias)
  int line = 0;        ///< 1-based
};

/// Parses the subproblem imports of a top-level file and checks the form the
/// prompts require. Errors say exactly which line is wrong and what to write.
Result<std::vector<TopImport>> parse_top_imports(const std::string& top_level);

/// Builds a topology from files an LLM returned. `files` maps relative paths
/// ("decomposed_problem.py", "subkernel_problems/x.py") to sources. Subproblem
/// files missing from `files` are taken from `base` (split and fuse return only
/// what changed). Subproblems the new top level no longer imports are dropped.
Result<Topology> topology_from_files(const std::map<std::string, std::string>& files,
                                     const Topology* base, std::string origin);

/// What changed between two topologies (for events and reports).
struct TopologyDiff {
  std::vector<std::string> added, removed, changed, kept;
  bool top_level_changed = false;
  bool empty() const { return added.empty() && removed.empty() && changed.empty() && !top_level_changed; }
  nlohmann::json to_json() const;
};
TopologyDiff diff(const Topology& before, const Topology& after);

/// Writes a file without fsync (scratch files), creating parent directories.
Status write_file_plain(const fs::path& path, const std::string& content);

/// True if s is a usable subproblem name (lower-case Python identifier, not a keyword).
bool valid_subproblem_name(const std::string& s);

}  // namespace mk::problem
