#include "rundir/clock.h"

#include <cstdio>
#include <ctime>

namespace mk::rundir {

std::string iso8601_utc(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  auto ms = duration_cast<milliseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  int frac = static_cast<int>(ms % 1000);
  if (frac < 0) frac += 1000, secs -= 1;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
  return buf;
}

std::optional<std::chrono::system_clock::time_point> parse_iso8601_utc(std::string_view s) {
  std::tm tm{};
  int ms = 0, n = 0;
  std::string str(s);
  if (std::sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &n) != 6)
    return std::nullopt;
  std::string_view rest = s.substr(static_cast<size_t>(n));
  if (!rest.empty() && rest[0] == '.') {
    size_t i = 1, digits = 0;
    while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9') {
      if (digits < 3) ms = ms * 10 + (rest[i] - '0'), ++digits;
      ++i;
    }
    if (i == 1) return std::nullopt;
    while (digits < 3) ms *= 10, ++digits;
    rest = rest.substr(i);
  }
  if (rest != "Z") return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  std::time_t secs = timegm(&tm);
  if (secs == static_cast<std::time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(secs) + std::chrono::milliseconds(ms);
}

}  // namespace mk::rundir
