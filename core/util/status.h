// SPDX-License-Identifier: GPL-3.0-or-later
// Errors as values: Status and Expected<T>. Core never aborts on a user's input.
#pragma once

#include <cassert>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kvscope {

/// What kind of failure a Status carries; the CLI maps every non-Ok code to exit status 2.
enum class StatusCode {
  Ok,
  InvalidArgument,  ///< a bad spec string, option or mapping
  InvalidData,      ///< a file that does not follow the dump format
  IoError,          ///< the operating system or HDF5 refused a read or write
  ResourceLimit,    ///< the request would need more memory than is available
  Cancelled,        ///< a progress callback asked to stop
  Unsupported,      ///< valid but not handled (e.g. an HDF5 filter we cannot decode)
  Internal,         ///< a bug in kvscope
};

/// A success or a failure with a message meant for a person ("file: dataset: problem").
class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  static Status invalidArgument(std::string m) { return {StatusCode::InvalidArgument, std::move(m)}; }
  static Status invalidData(std::string m) { return {StatusCode::InvalidData, std::move(m)}; }
  static Status ioError(std::string m) { return {StatusCode::IoError, std::move(m)}; }
  static Status resourceLimit(std::string m) { return {StatusCode::ResourceLimit, std::move(m)}; }
  static Status cancelled(std::string m = "cancelled") { return {StatusCode::Cancelled, std::move(m)}; }
  static Status unsupported(std::string m) { return {StatusCode::Unsupported, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::Internal, std::move(m)}; }

  [[nodiscard]] bool isOk() const { return code_ == StatusCode::Ok; }
  explicit operator bool() const { return isOk(); }
  [[nodiscard]] StatusCode code() const { return code_; }
  [[nodiscard]] const std::string& message() const { return message_; }

  /// Returns a copy whose message is prefixed with `context: `.
  [[nodiscard]] Status withContext(std::string_view context) const {
    if (isOk()) return *this;
    return {code_, std::string(context) + ": " + message_};
  }

 private:
  StatusCode code_ = StatusCode::Ok;
  std::string message_;
};

/// A value or the Status explaining why there is none.
template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Expected(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).isOk() && "Expected constructed from an ok Status");
  }

  [[nodiscard]] bool hasValue() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return hasValue(); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  /// The failure; Status::ok() when a value is held.
  [[nodiscard]] Status status() const { return hasValue() ? Status::ok() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

/// Progress callback for long work: `fraction` in [0, 1], `what` a short phrase.
/// Returning false asks the work to stop; it then returns Status::cancelled().
using Progress = std::function<bool(double fraction, std::string_view what)>;

/// Calls `p` when set; true means "go on".
inline bool report(const Progress& p, double fraction, std::string_view what) {
  return !p || p(fraction, what);
}

}  // namespace kvscope

/// Returns the Status of `expr` from the enclosing function when it failed.
#define KVS_RETURN_IF_ERROR(expr)            \
  do {                                       \
    ::kvscope::Status kvs_status_ = (expr);  \
    if (!kvs_status_.isOk()) return kvs_status_; \
  } while (0)
