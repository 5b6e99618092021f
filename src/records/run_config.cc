#include "records/run_config.h"

#include "records/record.h"

namespace mk::records {

nlohmann::json RunConfig::to_json() const {
  nlohmann::json j = write_fields(*this);
  merge_unknown(j, extra);
  return j;
}

std::optional<RunConfig> RunConfig::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  RunConfig c;
  read_fields(j, c);
  c.extra = unknown_part(j, c.to_json());
  return c;
}

}  // namespace mk::records
