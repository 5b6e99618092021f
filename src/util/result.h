// Errors are values: a Result<T> holds either a T or an error message.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace mk {

/// What an error is about, where a caller must act on it (an exit status, say)
/// without searching its text. util/exit_code.h maps each kind to the
/// process's exit status (one table for every command).
enum class ErrorKind {
  kOther,        ///< the command ran and failed
  kBadInput,     ///< the user's input is wrong (a flag, a spec, a file): fix it and run again
  kMissing,      ///< something missing on this machine: GPU, torch, Triton, a worker, the LLM endpoint
  kInterrupted,  ///< stopped by Ctrl-C or SIGTERM
};

/// An error with a one-line, actionable message.
struct Error {
  std::string message;
  ErrorKind kind = ErrorKind::kOther;
};

/// Either a value or an Error. Cheap to move; test with ok() or operator bool.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                // NOLINT: implicit by design
  Result(Error err) : v_(std::move(err)) {}                // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const std::string& error() const { return std::get<1>(v_).message; }
  const Error& error_info() const { return std::get<1>(v_); }
  ErrorKind error_kind() const { return std::get<1>(v_).kind; }

 private:
  std::variant<T, Error> v_;
};

/// Result of an operation with no value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error err) : err_(std::move(err)) {}  // NOLINT
  static Status Ok() { return Status(); }
  bool ok() const { return !err_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return err_->message; }
  const Error& error_info() const { return *err_; }
  ErrorKind error_kind() const { return err_->kind; }

 private:
  std::optional<Error> err_;
};

}  // namespace mk
