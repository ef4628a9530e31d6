// SPDX-License-Identifier: GPL-3.0-or-later
// What every part of the Python module shares: core's Status as a Python exception, a Progress
// that lets Python interrupt long work (KeyboardInterrupt, or a callback returning False), and
// running core with the GIL released.
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "core/util/status.h"

namespace kvscope::python {

namespace py = pybind11;

/// Raises `status` as the Python exception of its code, with its message (the CLI's words):
/// ValueError for bad input, OSError for the file system, MemoryError for a resource limit,
/// kvscope.Cancelled for a cancel, RuntimeError for a bug. A Python exception already pending (a
/// KeyboardInterrupt met during the work) wins. Needs the GIL.
[[noreturn]] void raise(const Status& status);

/// The value of `e`, or raise(e.status()).
template <typename T>
T valueOr(Expected<T>&& e) {
  if (!e) raise(e.status());
  return std::move(e.value());
}
/// raise(s) unless it is ok.
inline void check(const Status& s) {
  if (!s.isOk()) raise(s);
}

/// Lets Python stop core's long work. Its Progress, called by core without the GIL, takes the
/// GIL at most every `kPollInterval` (and at the end) to run pending signal handlers
/// (PyErr_CheckSignals: Ctrl-C raises KeyboardInterrupt there) and the user's callback
/// `callback(fraction, what)`; an exception or a False from either stops the work, and
/// finish() raises it once core has returned.
class Interrupter {
 public:
  static constexpr std::chrono::milliseconds kPollInterval{100};

  /// `callback`: None or a callable(fraction: float, what: str) -> bool | None. Needs the GIL.
  explicit Interrupter(py::object callback = py::none());
  ~Interrupter();
  Interrupter(const Interrupter&) = delete;
  Interrupter& operator=(const Interrupter&) = delete;

  /// The Progress to hand to core (valid while this object lives).
  Progress progress();
  /// Whether the work should stop (the dump reader's wait polls this); runs no callback.
  bool interrupted();
  /// With the GIL, after the work: raises what stopped it (a pending exception), if anything did.
  void finish();

  /// The Interrupter of the work running on this thread, or nullptr (the isolated reader's
  /// cancel hook asks it).
  static Interrupter* current();

 private:
  bool poll(double fraction, std::string_view what, bool runCallback);

  py::object callback_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point last_;
  bool stop_ = false;
  std::optional<py::error_already_set> error_;
  Interrupter* previous_ = nullptr;
};

/// Runs `f` (returning an Expected or a Status) with the GIL released under `interrupter`, then
/// raises what interrupted it or the failure; returns the value.
template <typename F>
auto runReleased(Interrupter& interrupter, F&& f) {
  using R = decltype(f());
  std::optional<R> result;
  {
    py::gil_scoped_release release;
    result.emplace(f());
  }
  interrupter.finish();
  if constexpr (std::is_same_v<R, Status>) {
    check(*result);
  } else {
    return valueOr(std::move(*result));
  }
}

/// json.loads(text).
py::object parseJson(const std::string& text);

}  // namespace kvscope::python
