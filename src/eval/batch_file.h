// Batch files for `mkevolve eval --batch FILE`: many (problem, kernel) pairs
// evaluated by one worker pool. One pair per line:
//
//   # comment (a line whose first non-blank character is '#')
//   problems/01_relu.py   kernels/01_relu__triton.py
//   /abs/02_softmax.py    "dir with spaces/solution_pkg"
//
// Fields are separated by spaces or tabs; blank lines and comments are skipped;
// a CR before the newline is dropped. A field may be wrapped in double quotes
// to hold spaces (no escapes: a quoted field cannot contain '"'). Relative
// paths are relative to the batch file's directory, not the working directory.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace mk::eval {

struct BatchPair {
  std::filesystem::path problem;  ///< made relative to the batch file's directory when written relative
  /// Joined likewise. parse_batch keeps a solution package directory as written;
  /// read_batch_file resolves it to its decomposed_solution.py.
  std::filesystem::path kernel;
  int line = 0;                   ///< 1-based line in the batch file
};

/// Splits one line into fields (whitespace-separated, double quotes group). An
/// error (an unterminated quote, a quote inside a bare field) says what is wrong.
Result<std::vector<std::string>> split_batch_fields(std::string_view line);

/// A batch file's well-formed pairs, and one message per bad line in file
/// order ("FILE:LINE: expected 'PROBLEM KERNEL', got '...'", "FILE:LINE: PATH:
/// no such file", ...). Both are kept so that a caller can check the good pairs
/// further and report every problem in one go.
struct BatchContents {
  std::vector<BatchPair> pairs;
  std::vector<std::string> errors;
  bool ok() const { return errors.empty(); }
};

/// Parses a batch file's text; `file` names it in errors and its parent
/// directory anchors relative paths. Touches no file. The Error case: the text
/// holds no line at all besides blanks and comments.
Result<BatchContents> parse_batch(std::string_view text, const std::filesystem::path& file);

/// Reads and parses `file`, then checks every well-formed pair on disk: the
/// problem must be a regular file; the kernel a regular file or a solution
/// package directory, which resolves to its decomposed_solution.py
/// (resolve_kernel_path). A pair that fails moves to `errors`. The Error case:
/// `file` itself is missing, unreadable, or holds no pair lines.
Result<BatchContents> read_batch_file(const std::filesystem::path& file);

}  // namespace mk::eval
