// Parsing LLM replies: files arrive as fenced code blocks tagged with a path
// (```python file=subkernel_problems/x.py). The parser tolerates the usual
// variations (path=, title=, python:PATH, a `# file:` first line, a path on the
// line before the fence) and reports what is wrong in words the LLM can act on.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "util/result.h"

namespace mk::agents {

struct CodeBlock {
  std::string lang;   ///< "python", "" ...
  std::string path;   ///< "" when the block carries none
  std::string code;
  bool closed = true; ///< false: the reply ended inside the block (truncated)
};

std::vector<CodeBlock> extract_code_blocks(const std::string& text);

/// One complete kernel file defining ModelNew.
Result<std::string> parse_kernel_reply(const std::string& text);

/// Files by relative path. A path-less block that defines ModelNew is taken as
/// decomposed_problem.py when no block carries that path.
Result<std::map<std::string, std::string>> parse_files_reply(const std::string& text);

/// The fuse agent may decline: the reply is NO_CHANGE and has no code.
bool is_no_change_reply(const std::string& text);

struct JudgeVerdict {
  bool cheating = false;
  std::string reason;
};
Result<JudgeVerdict> parse_verdict(const std::string& text);

/// What the re-ask prompt tells the LLM about the expected format.
extern const char* kKernelFormatHint;
extern const char* kFilesFormatHint;

}  // namespace mk::agents
