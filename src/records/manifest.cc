#include "records/manifest.h"

#include "records/record.h"

namespace mk::records {

nlohmann::json SolutionManifest::to_json() const { return write_with_extra(*this); }

std::optional<SolutionManifest> SolutionManifest::from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("subkernels") || !j["subkernels"].is_array()) return std::nullopt;
  return read_with_extra<SolutionManifest>(j);
}

ManifestSubkernel* SolutionManifest::find(const std::string& name) {
  for (auto& s : subkernels)
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace mk::records
