// Cheap checks of the input files before any worker starts: what a problem or
// candidate file defines (an AST peek, no torch), and the static cheat checks
// (`mkevolve check`). Both run the configured Python without torch.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "util/result.h"

namespace mk::eval {

struct FileDefinitions {
  std::filesystem::path path;
  std::vector<std::string> names;  ///< top-level names (classes, functions, assignments, imports)
  bool star_import = false;        ///< `from x import *`: names are unknowable
  std::string syntax_error;        ///< "line 3: invalid syntax" when the file does not parse
};

/// Parses each file with Python's ast. Errors only when Python cannot run.
Result<std::vector<FileDefinitions>> peek_definitions(const std::string& python,
                                                      const std::vector<std::filesystem::path>& files);

/// Checks that a problem defines Model and get_inputs; empty when fine, else
/// a one-line error naming the file and what is missing.
std::string problem_input_error(const FileDefinitions& d);
/// Checks that a candidate defines ModelNew (a file that does not parse is
/// left to the worker, which reports it as a compile error).
std::string kernel_input_error(const FileDefinitions& d);

struct Violation {
  std::string file;
  int line = 0;
  std::string rule, message;
  std::string to_line() const;  ///< "file:line: rule: message"
};

struct StaticCheck {
  bool clean = false;
  std::vector<Violation> violations;
};

/// Runs the worker's static checker (mkevolve_worker.static_check.check_file)
/// on one candidate file. worker_dir empty = install_root()/worker.
Result<StaticCheck> run_static_check(const std::string& python, const std::filesystem::path& kernel,
                                     bool allow_pytorch, const std::filesystem::path& worker_dir = {});

}  // namespace mk::eval
