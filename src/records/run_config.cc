#include "records/run_config.h"

#include "records/record.h"

namespace mk::records {

nlohmann::json RunConfig::to_json() const { return write_with_extra(*this); }

std::optional<RunConfig> RunConfig::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  return read_with_extra<RunConfig>(j);
}

}  // namespace mk::records
