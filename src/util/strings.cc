#include "util/strings.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace mk {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string nearest(const std::string& word, const std::vector<std::string>& candidates, size_t below) {
  std::string best;
  for (const auto& c : candidates)
    if (size_t d = edit_distance(word, c); d < below) below = d, best = c;
  return best;
}

std::string human_duration(double seconds) {
  long s = seconds > 0 ? static_cast<long>(seconds) : 0;
  char b[32];
  if (s < 60) std::snprintf(b, sizeof b, "%lds", s);
  else if (s < 3600) std::snprintf(b, sizeof b, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(b, sizeof b, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return b;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(line);
  }
  return out;
}

}  // namespace mk
