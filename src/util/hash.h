// Content hashes (SHA-256, hex) for caches and problem identity.
#pragma once

#include <string>
#include <string_view>

namespace mk {

/// Lower-case hex SHA-256 of data.
std::string sha256_hex(std::string_view data);

/// Lower-case hex HMAC-SHA256 of data under key.
std::string hmac_sha256_hex(std::string_view key, std::string_view data);

/// Incremental SHA-256: feed parts with update(); parts are length-prefixed so
/// ("ab","c") and ("a","bc") hash differently.
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  Hasher& update(std::string_view part);
  std::string hex();

 private:
  void* ctx_;
};

}  // namespace mk
