// config.json: what a run was started with, written once when its directory
// is created (run::create_run) and read by --resume, `mkevolve adapt` and
// `mkevolve swap`. Never a secret: the LLM spec as given (its credentials
// redacted, rundir/secrets.h), the endpoint URL and the config file's path.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "records/fields.h"

namespace mk::records {

struct RunConfig {
  std::string command{};       ///< run, evolve, bench, adapt
  std::string problem{};       ///< the problem's name
  std::string problem_file{};  ///< absolute path of the file it was started on
  std::string problem_hash{};
  std::string llm{}, judge{};  ///< provider specs (judge "" : none)
  std::string base_url{};      ///< --base-url ("" : none)
  std::string config{};        ///< the config file it read (absolute; "" : none)
  bool test_cpu = false;       ///< the worker's CPU test mode (--test-cpu-unsafe)
  nlohmann::json options = nlohmann::json::object();  ///< every search option (search::to_json)
  std::string problem_id{};    ///< bench runs: the suite id ("" : a lone run, not written)
  /// Fields this build does not know (a newer writer's), kept.
  nlohmann::json extra = nlohmann::json::object();

  static constexpr auto fields() {
    return std::tuple{field("command", &RunConfig::command),
                      field("problem", &RunConfig::problem),
                      field("problem_file", &RunConfig::problem_file),
                      field("problem_hash", &RunConfig::problem_hash),
                      field("llm", &RunConfig::llm),
                      field("judge", &RunConfig::judge),
                      field("base_url", &RunConfig::base_url),
                      field("config", &RunConfig::config),
                      field("test_cpu", &RunConfig::test_cpu),
                      field("options", &RunConfig::options),
                      field("problem_id", &RunConfig::problem_id, When::kIfSet)};
  }
  nlohmann::json to_json() const;
  /// Tolerant: a missing or mistyped field reads as its default; errors only
  /// when j is not an object.
  static std::optional<RunConfig> from_json(const nlohmann::json& j);
};

}  // namespace mk::records
