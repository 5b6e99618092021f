#include "records/manifest.h"

#include "records/record.h"

namespace mk::records {

nlohmann::json SolutionManifest::to_json() const {
  nlohmann::json j = write_fields(*this);
  merge_unknown(j, extra);
  return j;
}

std::optional<SolutionManifest> SolutionManifest::from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("subkernels") || !j["subkernels"].is_array()) return std::nullopt;
  SolutionManifest m;
  read_fields(j, m);
  m.extra = unknown_part(j, m.to_json());
  return m;
}

ManifestSubkernel* SolutionManifest::find(const std::string& name) {
  for (auto& s : subkernels)
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace mk::records
