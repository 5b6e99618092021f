// How both reports write numbers and values: speedups, times, shares, counts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mk::report {

/// "1.23×"; "—" for 0 or none: what an incorrect kernel, or one without a
/// torch.compile baseline, scores (no speed to show).
std::string speedup(const std::optional<double>& v);
/// Milliseconds: 4 decimals under 1 ms, else 3; "—" for none.
std::string ms(const std::optional<double>& v);
/// A fraction as a percentage, "25.5%"; "—" for none.
std::string pct(const std::optional<double>& v);
/// 1234567 -> "1,234,567"
std::string grouped(int64_t v);
/// versions.json's j[key] as text: "unknown" when missing, null or empty.
std::string vstr(const nlohmann::json& j, const char* key);
std::string joined(const std::vector<std::string>& v, const std::string& sep = ", ");

/// What "—" means, in both reports.
inline constexpr const char* kUnknownLegend =
    "\u2014 means not known: no correct kernel, or no baseline measured (never 0\u00d7)";

}  // namespace mk::report
