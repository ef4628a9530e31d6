// SPDX-License-Identifier: GPL-3.0-or-later
#include "python/src/binding.h"

namespace kvscope::python {

namespace {
thread_local Interrupter* tCurrent = nullptr;
}  // namespace

PyObject* cancelledType = nullptr;  // kvscope.Cancelled, created at import (module.cpp)

void raise(const Status& status) {
  if (PyErr_Occurred()) throw py::error_already_set();
  PyObject* type = PyExc_RuntimeError;
  switch (status.code()) {
    case StatusCode::Ok:
      PyErr_SetString(PyExc_RuntimeError, "kvscope: an ok status raised (a bug)");
      throw py::error_already_set();
    case StatusCode::InvalidArgument:
    case StatusCode::InvalidData:
    case StatusCode::Unsupported: type = PyExc_ValueError; break;
    case StatusCode::IoError: type = PyExc_OSError; break;
    case StatusCode::ResourceLimit: type = PyExc_MemoryError; break;
    case StatusCode::Cancelled: type = cancelledType ? cancelledType : PyExc_RuntimeError; break;
    case StatusCode::Internal: type = PyExc_RuntimeError; break;
  }
  PyErr_SetString(type, status.message().c_str());
  throw py::error_already_set();
}

Interrupter::Interrupter(py::object callback)
    : callback_(std::move(callback)), last_(std::chrono::steady_clock::now()), previous_(tCurrent) {
  tCurrent = this;
}

Interrupter::~Interrupter() { tCurrent = previous_; }

Interrupter* Interrupter::current() { return tCurrent; }

Progress Interrupter::progress() {
  return [this](double fraction, std::string_view what) { return poll(fraction, what, true); };
}

bool Interrupter::interrupted() { return !poll(-1.0, {}, false); }

bool Interrupter::poll(double fraction, std::string_view what, bool runCallback) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stop_) return false;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < kPollInterval && fraction < 1.0) return true;
  last_ = now;
  py::gil_scoped_acquire gil;
  // Signal handlers run here (in the main thread): Ctrl-C's KeyboardInterrupt becomes pending.
  if (PyErr_CheckSignals() != 0) {
    error_.emplace();  // fetches (and clears) the pending exception
    stop_ = true;
    return false;
  }
  if (runCallback && !callback_.is_none()) {
    try {
      py::object answer = callback_(fraction, std::string(what));
      if (answer.ptr() == Py_False) {
        stop_ = true;
        return false;
      }
    } catch (py::error_already_set& e) {
      error_.emplace(std::move(e));
      stop_ = true;
      return false;
    }
  }
  return true;
}

void Interrupter::finish() {
  if (error_) {
    py::error_already_set e = std::move(*error_);
    error_.reset();
    throw e;
  }
}

py::object parseJson(const std::string& text) {
  return py::module_::import("json").attr("loads")(text);
}

}  // namespace kvscope::python
