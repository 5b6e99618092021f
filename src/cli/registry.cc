#include "cli/registry.h"

#include <utility>

namespace mk::cli {

namespace {
std::vector<Command>& table() {
  static std::vector<Command> t;
  return t;
}
}  // namespace

Register::Register(std::string name, std::string summary, CommandFn fn) {
  table().push_back({std::move(name), std::move(summary), fn});
}

const std::vector<Command>& commands() { return table(); }

}  // namespace mk::cli
