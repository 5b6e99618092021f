#include "eval/evaluator.h"

namespace mk::eval {

namespace {
constexpr struct {
  Status status;
  const char* name;
} kStatusNames[] = {
    {Status::kCorrect, "correct"},         {Status::kIncorrect, "incorrect"},
    {Status::kCheating, "cheating"},       {Status::kCompileError, "compile_error"},
    {Status::kRuntimeError, "runtime_error"}, {Status::kTimeout, "timeout"},
    {Status::kCrashed, "crashed"},         {Status::kNoVerdict, "no_verdict"},
};
}  // namespace

const char* to_string(Status s) {
  for (const auto& e : kStatusNames)
    if (e.status == s) return e.name;
  return "crashed";
}

std::optional<Status> status_from_string(const std::string& s) {
  for (const auto& e : kStatusNames)
    if (s == e.name) return e.status;
  return std::nullopt;
}

}  // namespace mk::eval
