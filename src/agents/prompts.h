// Prompt templates (src/prompts/*.md) and their renderer. Templates are data,
// loaded at run time from install_root()/src/prompts; see src/prompts/README.md
// for the syntax. Loading checks every template renders, so a broken file
// stops a run before its first LLM call.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "util/result.h"

namespace mk::agents {

struct RenderedPrompt {
  std::string system;
  std::string user;
};

using Vars = std::map<std::string, std::string>;

class Prompts {
 public:
  /// Loads every *.md in dir. Errors name the directory or file.
  static Result<Prompts> load(const std::filesystem::path& dir);
  /// install_root()/src/prompts.
  static Result<Prompts> load_default();

  /// Renders template `name` (file name without .md). Every {{var}} it uses
  /// must be in vars; values are inserted verbatim (never re-expanded).
  Result<RenderedPrompt> render(const std::string& name, const Vars& vars) const;

  /// Hash of all template contents: recorded in run_start so a report can tell
  /// which prompt version produced a run.
  const std::string& version() const { return version_; }
  bool has(const std::string& name) const { return files_.count(name) > 0; }
  std::filesystem::path dir() const { return dir_; }

  /// Templates the agents use, each with the variables it gets.
  static const std::map<std::string, std::vector<std::string>>& required();

 private:
  std::map<std::string, std::string> files_;  ///< name (no .md) -> text
  std::filesystem::path dir_;
  std::string version_;
};

}  // namespace mk::agents
