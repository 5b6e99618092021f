#include "support/testing.h"

#include <cstdlib>

#include "util/subprocess.h"

namespace mk::testing {

std::filesystem::path repo_root() { return std::filesystem::path(MKEVOLVE_SOURCE_DIR); }

std::string test_python() {
  const char* p = std::getenv("MKEVOLVE_TEST_PYTHON");
  return p && *p ? p : "/usr/bin/python3";
}

bool test_python_has_torch() {
  static int cached = -1;
  if (cached < 0) {
    SubprocessOptions o;
    o.argv = {test_python(), "-c", "import torch"};
    cached = run_subprocess(o, {}, std::chrono::seconds(120)).ok() ? 1 : 0;
  }
  return cached == 1;
}

}  // namespace mk::testing
