// Small string helpers shared across components.
#pragma once

#include <string>
#include <vector>

namespace mk {

/// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b);

/// The candidate nearest to `word` by edit_distance, when it is closer than
/// `below` (the first of equals); "" when none is. What every "did you mean"
/// (commands, flags, provider kinds) suggests.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates, size_t below = 3);

/// A duration for people: "45s", "3m10s", "2h05m" (rounded down to the second).
std::string human_duration(double seconds);

/// Splits text into lines, dropping the newline and a trailing '\r' of each.
std::vector<std::string> split_lines(const std::string& s);

}  // namespace mk
