#include "run/run_env.h"

#include <cstdio>

#include "util/exit_code.h"

namespace mk::run {

int report_missing(const std::string& cmd, const std::vector<std::string>& missing) {
  for (const auto& m : missing) std::fprintf(stderr, "mkevolve %s: missing: %s\n", cmd.c_str(), m.c_str());
  return missing.empty() ? kExitOk : kExitEnvironment;
}

run::Shared shared_of(const Env& env) {
  run::Shared s;
  s.llm = env.llm.get();
  s.judge = env.judge.get();
  s.evaluator = env.pool.get();
  s.prompts = &env.prompts;
  s.hardware = env.hardware;
  s.versions = env.versions;
  return s;
}

}  // namespace mk::run
